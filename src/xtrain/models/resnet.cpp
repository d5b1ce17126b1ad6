// ResNet-18 assembly. Convs and BatchNorm are LibTorch's (no reason to own them); the classifier
// is nn::Linear so its GEMM goes through kernels::linear. Reference: tests/reference/gen_resnet.py.
#include "xtrain/models/resnet.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include "xtrain/base/error.h"

namespace xtrain::models {

namespace {

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// torchvision's BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)).
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    conv1_ = register_module("conv1", conv(in, out, 3, stride));
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(out));
    conv2_ = register_module("conv2", conv(out, out, 3, 1));
    bn2_ = register_module("bn2", torch::nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      downsample_ = register_module("downsample",
                                    torch::nn::Sequential(conv(in, out, 1, stride), torch::nn::BatchNorm2d(out)));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    auto y = bn1_->forward(conv1_->forward(x)).relu_();
    y = bn2_->forward(conv2_->forward(y));
    y += downsample_ ? downsample_->forward(x) : x;
    return y.relu_();
  }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(BasicBlock);

}  // namespace

ResNet18Impl::ResNet18Impl(int64_t num_classes, int64_t in_channels) : in_channels_(in_channels) {
  XTRAIN_USAGE_CHECK(num_classes > 0, "models: resnet18 needs xtrain.model.num_classes > 0, got ", num_classes);
  conv1_ = register_module("conv1", conv(in_channels, 64, 3, 1));
  bn1_ = register_module("bn1", torch::nn::BatchNorm2d(64));
  const int64_t widths[4] = {64, 128, 256, 512};
  int64_t in = 64;
  for (int i = 0; i < 4; ++i) {
    const int64_t stride = i == 0 ? 1 : 2;
    layers_[i] = register_module("layer" + std::to_string(i + 1),
                                 torch::nn::Sequential(BasicBlock(in, widths[i], stride), BasicBlock(widths[i], widths[i], 1)));
    in = widths[i];
  }
  fc_ = register_module("fc", nn::Linear(512, num_classes));  // torch.nn.Linear's default init
  at::NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {  // torchvision: convs kaiming fan_out/relu
    if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(m.get())) {
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    }  // BatchNorm2d is already weight 1, bias 0
  }
}

at::Tensor ResNet18Impl::forward(const at::Tensor& x) {
  XTRAIN_USAGE_CHECK(x.dim() == 4 && x.size(1) == in_channels_, "models: resnet18 input must be [B, ", in_channels_,
                     ", H, W], got ", x.sizes());
  auto y = bn1_->forward(conv1_->forward(x)).relu_();
  for (auto& layer : layers_) y = layer->forward(y);
  return fc_->forward(y.mean({2, 3}));  // global average pool: [B, 512, h, w] -> [B, 512]
}

}  // namespace xtrain::models
