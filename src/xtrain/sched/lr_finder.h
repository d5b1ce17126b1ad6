// Suggests a learning rate from an LR range test (`xtrain train --find-lr`): the lr at the steepest
// descent of the smoothed loss against log(lr), before the loss diverges. Design choice: a centred
// smoother, so the suggestion is not shifted toward larger lrs as with an EMA.
#pragma once
#include <vector>

namespace xtrain::sched {

// The rule, step by step:
//  1. smooth the loss with a centred moving average over 2h+1 points, h = max(1, n/20) (fewer at
//     the ends); centred, so unlike an EMA it does not shift the curve toward larger lrs;
//  2. divergence: the curve is cut at the first non-finite loss or the first smoothed value above
//     4x the lowest smoothed value before it (the stop rule of fastai's lr_find);
//  3. the slope d(smoothed)/d(log lr) by central differences (one-sided at the ends);
//  4. the answer is the lr with the most negative slope at or before the smoothed minimum. When the
//     loss never decreases (the minimum is the first point) it is the smallest lr tried.
// lrs: > 0 and strictly increasing; losses: the training loss at each lr (same length, >= 5).
double suggest_lr(const std::vector<double>& lrs, const std::vector<double>& losses);

}  // namespace xtrain::sched
