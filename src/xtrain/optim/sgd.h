// SGD over flat buffers with torch.optim.SGD semantics: weight decay added to the gradient,
// momentum buffer = g on the first step then momentum*buf + (1 - dampening)*g, Nesterov optional.
// The buffer exists only when momentum != 0 (as in torch, which keeps none without momentum).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/optimizer.h"

namespace xtrain::optim {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const SgdParams& params);
  std::string name() const override { return "SGD"; }
  void init_state(int64_t numel) override;
  void step(const StepInputs& in) override;
  std::vector<std::pair<std::string, at::Tensor>> state() override;

 private:
  SgdParams params_;
  int64_t numel_ = -1;
  at::Tensor momentum_buffer_;
};

}  // namespace xtrain::optim
