// Distillation losses from log_softmax (no exp of large logits).
#include "xtrain/compress/distill/distillation.h"

#include <ATen/Functions.h>

#include "xtrain/base/error.h"

namespace xtrain::compress {

at::Tensor soft_target_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits, double temperature) {
  XTRAIN_USAGE_CHECK(temperature > 0, "compress: distillation.temperature must be > 0, got ", temperature);
  TORCH_CHECK(student_logits.sizes() == teacher_logits.sizes(), "compress: student logits ", student_logits.sizes(),
              " and teacher logits ", teacher_logits.sizes(), " differ in shape");
  const int64_t V = student_logits.size(-1);
  const auto s = at::log_softmax(student_logits.reshape({-1, V}).to(at::kFloat) / temperature, -1);
  const auto t = at::log_softmax(teacher_logits.detach().reshape({-1, V}).to(at::kFloat) / temperature, -1);
  const auto kl = (t.exp() * (t - s)).sum(-1).mean();
  return kl * (temperature * temperature);
}

at::Tensor distillation_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                             const at::Tensor& target, const DistillOptions& o,
                             const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& hard_loss) {
  XTRAIN_USAGE_CHECK(o.alpha >= 0 && o.alpha <= 1, "compress: distillation.alpha must be in [0, 1], got ", o.alpha);
  at::Tensor loss;
  if (o.alpha > 0) loss = soft_target_loss(student_logits, teacher_logits, o.temperature) * o.alpha;
  if (o.alpha < 1) {
    const auto hard = hard_loss(student_logits, target) * (1.0 - o.alpha);
    loss = loss.defined() ? loss + hard : hard;
  }
  return loss;
}

}  // namespace xtrain::compress
