// ResNet-18 for 1-channel 28x28 images, CIFAR-style stem (He et al. 2016; torchvision's layout
// and init): conv3x3 1->64 stride 1, BN, ReLU, no max-pool; BasicBlock stages [2, 2, 2, 2] with
// 64/128/256/512 channels and strides 1/2/2/2 (1x1 conv + BN downsample); global average pool;
// `fc`. Parameter names are torchvision's (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>

#include "xtrain/nn/linear.h"

namespace torch::nn {  // forward declarations keep conv/batchnorm headers out of ours
class Conv2dImpl;
class BatchNorm2dImpl;
class SequentialImpl;
}  // namespace torch::nn

namespace xtrain::models {

class ResNet18Impl : public torch::nn::Module {
 public:
  explicit ResNet18Impl(int64_t num_classes, int64_t in_channels = 1);
  at::Tensor forward(const at::Tensor& x);  // float [B, in_channels, H, W] -> logits [B, num_classes]

 private:
  std::shared_ptr<torch::nn::Conv2dImpl> conv1_;
  std::shared_ptr<torch::nn::BatchNorm2dImpl> bn1_;
  std::shared_ptr<torch::nn::SequentialImpl> layers_[4];  // "layer1" .. "layer4"
  nn::Linear fc_{nullptr};
  int64_t in_channels_;
};
TORCH_MODULE(ResNet18);

}  // namespace xtrain::models
