// CPU feature detection against the kernel's own reading of CPUID: /proc/cpuinfo's flags.
#include "xtrain/base/cpu_isa.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace xtrain::base::cpu_isa_test {
namespace {

// The flag words of the first processor entry ("" when /proc/cpuinfo cannot be read).
std::string cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) == 0) return " " + line.substr(line.find(':') + 1) + " ";
  }
  return "";
}

bool has_flag(const std::string& flags, const std::string& name) {
  return flags.find(" " + name + " ") != std::string::npos;
}

TEST(CpuIsa, NativeBf16AgreesWithProcCpuinfo) {
  const auto flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo";
  const bool expected = has_flag(flags, "avx512_bf16") || has_flag(flags, "amx_bf16");
  EXPECT_EQ(cpu_has_native_bf16(), expected) << "flags:" << flags;
}

TEST(CpuIsa, BestIsaAgreesWithProcCpuinfo) {
  const auto flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo";
  const bool avx512 = has_flag(flags, "avx512f") && has_flag(flags, "avx512bw") && has_flag(flags, "avx512vl") &&
                      has_flag(flags, "avx512dq");
  const bool avx2 = has_flag(flags, "avx2") && has_flag(flags, "fma");
  EXPECT_EQ(best_cpu_isa(), avx512 ? Isa::kAvx512 : avx2 ? Isa::kAvx2 : Isa::kScalar);
}

}  // namespace
}  // namespace xtrain::base::cpu_isa_test
