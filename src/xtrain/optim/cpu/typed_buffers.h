// The dtype dispatch shared by the fused optimizer kernels (kernel_bodies.h, quant8.cpp): calls
// f(grads + begin, lowp + begin) with both pointers typed by the buffers' dtypes. Gradients are
// fp32, bf16 or fp16; the low-precision parameter copy is fp16, bf16 or absent (a null BFloat16*).
// `B` is any buffer set with grads, grad_type, lowp and lowp_type (FlatBuffers, Adam8bitBuffers).
#pragma once
#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <cstdint>

namespace xtrain::optim::cpu {

template <class B, class F>
inline __attribute__((always_inline)) void with_typed_buffers(const B& b, int64_t begin, F&& f) {
  auto with_lowp = [&](const auto* g) {
    if (b.lowp == nullptr) {
      f(g, static_cast<c10::BFloat16*>(nullptr));
    } else if (b.lowp_type == c10::ScalarType::Half) {
      f(g, static_cast<c10::Half*>(b.lowp) + begin);
    } else {
      f(g, static_cast<c10::BFloat16*>(b.lowp) + begin);
    }
  };
  switch (b.grad_type) {
    case c10::ScalarType::Float: return with_lowp(static_cast<const float*>(b.grads) + begin);
    case c10::ScalarType::BFloat16: return with_lowp(static_cast<const c10::BFloat16*>(b.grads) + begin);
    case c10::ScalarType::Half: return with_lowp(static_cast<const c10::Half*>(b.grads) + begin);
    default: TORCH_INTERNAL_ASSERT(false, "optim: unexpected grad dtype ", b.grad_type);
  }
}

}  // namespace xtrain::optim::cpu
