// PipelineExecutor; see pipeline_executor.h. One slot per micro-batch holds its stage input (a
// leaf that requires grad, so its .grad() is the gradient to send back), its output and, on the
// last stage, its loss; a slot is released after its backward.
#include "xtrain/parallel/pipeline/pipeline_executor.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"

namespace xtrain::parallel::pipeline {
namespace {

constexpr int64_t kMaxDims = 8;
constexpr int kActivationTag = 0, kGradTag = 1;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Slot {
  at::Tensor input, output, loss, grad;  // grad: d loss / d output, received from the next stage
};

}  // namespace

PipelineExecutor::PipelineExecutor(StageFn stage, std::shared_ptr<comm::Communicator> comm, LossFn loss,
                                   std::function<void()> on_step)
    : fn_(std::move(stage)), comm_(std::move(comm)), loss_(std::move(loss)), on_step_(std::move(on_step)) {
  if (comm_) {
    stage_ = comm_->rank();
    stages_ = comm_->size();
  }
}

void PipelineExecutor::send_activation(const at::Tensor& t) {
  XTRAIN_USAGE_CHECK(t.dim() <= kMaxDims, "pipeline: activations may have at most ", kMaxDims, " dims, got ", t.dim());
  auto header = at::zeros({kMaxDims + 2}, at::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = static_cast<int64_t>(t.scalar_type());
  h[1] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) h[2 + d] = t.size(d);
  sends_.push_back(comm_->send(header, stage_ + 1, kActivationTag, /*async=*/true));
  sends_.push_back(comm_->send(t, stage_ + 1, kActivationTag, /*async=*/true));
}

at::Tensor PipelineExecutor::recv_activation() {
  auto header = at::zeros({kMaxDims + 2}, at::kLong);
  comm_->recv(header, stage_ - 1, kActivationTag);
  auto h = header.accessor<int64_t, 1>();
  std::vector<int64_t> sizes(h[1]);
  for (int64_t d = 0; d < h[1]; ++d) sizes[d] = h[2 + d];
  auto t = at::empty(sizes, at::TensorOptions().dtype(static_cast<at::ScalarType>(h[0])));
  comm_->recv(t, stage_ - 1, kActivationTag);
  return t;
}

at::Tensor PipelineExecutor::run(const Schedule& schedule, const std::vector<at::Tensor>& inputs,
                                 const std::vector<at::Tensor>& targets) {
  const bool first = stage_ == 0, last = stage_ == stages_ - 1;
  int m = 0;
  size_t last_backward = schedule.size();  // index of the run's final kBackward
  for (size_t i = 0; i < schedule.size(); ++i) {
    m = std::max(m, schedule[i].micro_batch + 1);
    if (schedule[i].type == ActionType::kBackward) last_backward = i;
  }
  XTRAIN_USAGE_CHECK(!first || static_cast<int>(inputs.size()) >= m, "pipeline: the first stage needs ", m,
                     " micro-batch inputs, got ", inputs.size());
  XTRAIN_USAGE_CHECK(!last || static_cast<int>(targets.size()) >= m, "pipeline: the last stage needs ", m,
                     " micro-batch targets, got ", targets.size());
  std::vector<Slot> slots(m);
  sends_.clear();
  at::Tensor total;
  stats_ = {};
  int in_flight = 0;
  const double start = now_s();
  for (size_t i = 0; i < schedule.size(); ++i) {
    const Action& a = schedule[i];
    Slot* s = a.micro_batch >= 0 ? &slots[a.micro_batch] : nullptr;
    switch (a.type) {
      case ActionType::kRecvActivation:
        s->input = recv_activation().requires_grad_();
        break;
      case ActionType::kForward: {
        const double t0 = now_s();
        if (first) s->input = inputs[a.micro_batch];
        s->output = fn_(s->input);
        if (last) {
          s->loss = loss_(s->output, targets[a.micro_batch]) / m;
          total = total.defined() ? total + s->loss.detach() : s->loss.detach();
        }
        stats_.busy_s += now_s() - t0;
        stats_.max_in_flight = std::max(stats_.max_in_flight, ++in_flight);
        break;
      }
      case ActionType::kSendActivation:
        send_activation(s->output.detach().contiguous());
        break;
      case ActionType::kRecvGrad:
        s->grad = at::empty(s->output.sizes(), s->output.options());
        comm_->recv(s->grad, stage_ + 1, kGradTag);
        break;
      case ActionType::kBackward: {
        const bool final_backward = i == last_backward;
        if (hooks_.before_backward) hooks_.before_backward(a.micro_batch, final_backward);
        const double t0 = now_s();  // busy_s: the backward itself, not the hooks' communication
        if (last) {
          torch::autograd::backward({s->loss});
        } else {
          torch::autograd::backward({s->output}, {s->grad});
        }
        stats_.busy_s += now_s() - t0;
        if (hooks_.after_backward) hooks_.after_backward(a.micro_batch, final_backward);
        --in_flight;
        s->output = s->loss = s->grad = at::Tensor();
        break;
      }
      case ActionType::kSendGrad:
        TORCH_INTERNAL_ASSERT(s->input.grad().defined(), "pipeline: no input gradient for micro-batch ", a.micro_batch);
        sends_.push_back(comm_->send(s->input.grad().contiguous(), stage_ - 1, kGradTag, /*async=*/true));
        s->input = at::Tensor();
        break;
      case ActionType::kReduceGrads:
        break;  // data-parallel / tied-weight reduction belongs to the caller's gradient reducer
      case ActionType::kOptimizerStep:
        if (on_step_) on_step_();
        break;
    }
  }
  for (auto& w : sends_) w.wait();
  sends_.clear();
  stats_.total_s = now_s() - start;
  return last ? total : at::Tensor();
}

}  // namespace xtrain::parallel::pipeline
