// The x86 vector instruction set a hand-vectorised kernel family runs with: the widest this CPU
// supports, or one forced by tests and benchmarks. Each family (optimizer steps, attention tiles)
// keeps its own switch so forcing one does not change the other.
#pragma once
#include <atomic>

namespace xtrain::base {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

Isa best_cpu_isa();  // AVX-512 (F, BW, VL, DQ) > AVX2 + FMA (every such CPU also has F16C) > scalar
const char* isa_name(Isa isa);
// Whether the CPU multiplies bf16 natively (AVX512-BF16 or AMX-BF16): there oneDNN's bf16 matmul
// runs ~2x fp32's rate; elsewhere bf16 is emulated and slower than fp32.
bool cpu_has_native_bf16();

class IsaSwitch {
 public:
  explicit IsaSwitch(const char* family) : family_(family), active_(static_cast<int>(best_cpu_isa())) {}
  Isa active() const { return static_cast<Isa>(active_.load(std::memory_order_relaxed)); }
  // Must be <= best_cpu_isa() (a UsageError naming the family otherwise); returns the previous one.
  Isa force(Isa isa);

 private:
  const char* family_;
  std::atomic<int> active_;
};

}  // namespace xtrain::base
