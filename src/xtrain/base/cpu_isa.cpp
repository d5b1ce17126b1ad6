#include "xtrain/base/cpu_isa.h"

#include <cpuid.h>

#include "xtrain/base/error.h"

namespace xtrain::base {

namespace {

Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kScalar;
}

}  // namespace

Isa best_cpu_isa() {
  static const Isa best = detect();
  return best;
}

bool cpu_has_native_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned max_subleaf = eax;
  const bool amx_bf16 = (edx >> 22) & 1u;
  if (amx_bf16) return true;
  if (max_subleaf < 1 || !__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax >> 5) & 1u;  // AVX512_BF16
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "scalar";
  }
}

Isa IsaSwitch::force(Isa isa) {
  XTRAIN_USAGE_CHECK(static_cast<int>(isa) <= static_cast<int>(best_cpu_isa()), family_, ": this CPU cannot run the ",
                     isa_name(isa), " kernels (best: ", isa_name(best_cpu_isa()), ")");
  return static_cast<Isa>(active_.exchange(static_cast<int>(isa)));
}

}  // namespace xtrain::base
