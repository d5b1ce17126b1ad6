// MaskSet: exact counts (topk of the smallest magnitudes), global groups by concatenation.
#include "xtrain/compress/prune/magnitude.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <map>
#include <unordered_set>

#include "xtrain/base/error.h"

namespace xtrain::compress {

namespace {

// A mask with the `k` smallest entries of `magnitude` (flat) false.
at::Tensor keep_mask(const at::Tensor& magnitude, int64_t k) {
  auto mask = at::ones({magnitude.numel()}, at::kBool);
  if (k > 0) mask.index_fill_(0, std::get<1>(at::topk(magnitude, k, 0, /*largest=*/false)), false);
  return mask;
}

}  // namespace

MaskSet::MaskSet(std::vector<PruneTarget> targets) : targets_(std::move(targets)) {
  for (const auto& t : targets_) masks_.push_back(at::ones(t.weight.sizes(), at::kBool));
}

void MaskSet::update(double fraction) {
  std::vector<double> s;
  for (const auto& t : targets_) s.push_back(t.sparsity * fraction);
  update_to(s);
}

void MaskSet::update_to(const std::vector<double>& sparsities) {
  TORCH_CHECK(sparsities.size() == targets_.size(), "compress: one sparsity per pruning target");
  at::NoGradGuard no_grad;
  std::map<int, std::vector<size_t>> groups;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const auto& t = targets_[i];
    if (t.group >= 0) {
      groups[t.group].push_back(i);
      continue;
    }
    const auto mag = t.weight.detach().abs().reshape({-1}).to(at::kFloat);
    const auto k = static_cast<int64_t>(std::llround(sparsities[i] * static_cast<double>(mag.numel())));
    masks_[i] = keep_mask(mag, k).view(t.weight.sizes());
  }
  for (const auto& [group, members] : groups) {
    std::vector<at::Tensor> mags;
    for (size_t i : members) mags.push_back(targets_[i].weight.detach().abs().reshape({-1}).to(at::kFloat));
    const auto all = at::cat(mags);
    const auto k = static_cast<int64_t>(std::llround(sparsities[members[0]] * static_cast<double>(all.numel())));
    const auto mask = keep_mask(all, k);
    int64_t offset = 0;
    for (size_t i : members) {
      const int64_t n = targets_[i].weight.numel();
      masks_[i] = mask.narrow(0, offset, n).view(targets_[i].weight.sizes()).clone();
      offset += n;
    }
  }
  apply();
}

void MaskSet::apply() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < targets_.size(); ++i) targets_[i].weight.mul_(masks_[i]);
}

double MaskSet::sparsity() const {
  int64_t zeros = 0, total = 0;
  for (const auto& t : targets_) {
    zeros += t.weight.numel() - t.weight.count_nonzero().item<int64_t>();
    total += t.weight.numel();
  }
  return total ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0;
}

double agp_sparsity(int64_t step, double initial, double final_sparsity, int64_t start_step, int64_t end_step,
                    int64_t frequency) {
  XTRAIN_USAGE_CHECK(end_step > start_step && frequency > 0, "compress: pruning.schedule needs end_step > start_step",
                     " and frequency > 0, got start ", start_step, ", end ", end_step, ", frequency ", frequency);
  if (step < start_step) return initial;
  if (step >= end_step) return final_sparsity;
  const int64_t t = start_step + (step - start_step) / frequency * frequency;
  const double progress = static_cast<double>(t - start_step) / static_cast<double>(end_step - start_step);
  return final_sparsity + (initial - final_sparsity) * std::pow(1.0 - progress, 3);
}

double weight_sparsity(const Graph& graph) {
  std::unordered_set<const void*> seen;
  int64_t zeros = 0, total = 0;
  for (const auto& n : graph.nodes) {
    if (n.kind != OpKind::kLinear && n.kind != OpKind::kConv2d) continue;
    if (!seen.insert(n.weight.unsafeGetTensorImpl()).second) continue;
    zeros += n.weight.numel() - n.weight.count_nonzero().item<int64_t>();
    total += n.weight.numel();
  }
  return total ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0;
}

}  // namespace xtrain::compress
