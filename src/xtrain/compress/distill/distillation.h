// Knowledge distillation (Hinton, Vinyals & Dean 2015): the student matches the teacher's
// softened distribution, α·T²·KL(softmax(z_t/T) ‖ softmax(z_s/T)) averaged over rows, mixed with
// (1 − α)·the hard-label loss. T² keeps the soft term's gradient scale independent of T.
// Language-model logits [B, T, V] are flattened to rows of V.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>

#include "xtrain/compress/options.h"

namespace xtrain::compress {

// KL(softmax(teacher/T) ‖ softmax(student/T)) · T², mean over rows (F.kl_div(..., 'batchmean')).
at::Tensor soft_target_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits, double temperature);

// α·soft + (1 − α)·hard_loss(student, target). The teacher's logits carry no gradient.
at::Tensor distillation_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                             const at::Tensor& target, const DistillOptions& options,
                             const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& hard_loss);

}  // namespace xtrain::compress
