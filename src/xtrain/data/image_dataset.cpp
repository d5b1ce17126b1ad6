// ImageDataset: a byte → float table and memcpy-shaped loops into preallocated batch tensors.
#include "xtrain/data/image_dataset.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/upsample_bilinear2d.h>

#include "xtrain/base/error.h"

namespace xtrain::data {

ImageDataset::ImageDataset(at::Tensor images, at::Tensor labels, ImageNormalisation norm, int64_t num_classes,
                           const std::string& what, int64_t resize)
    : images_(images.contiguous()), labels_(labels.contiguous()), num_classes_(num_classes), resize_(resize) {
  XTRAIN_USAGE_CHECK(resize >= 0, "data: xtrain.data.image_size must be >= 0 (0: as stored), got ", resize);
  TORCH_INTERNAL_ASSERT(images_.dim() == 3 && labels_.dim() == 1);
  TORCH_INTERNAL_ASSERT(images_.scalar_type() == at::kByte && labels_.scalar_type() == at::kByte);
  XTRAIN_USAGE_CHECK(images_.size(0) == labels_.size(0), "data: ", what, ": ", images_.size(0), " images but ",
                     labels_.size(0), " labels");
  const uint8_t* l = labels_.data_ptr<uint8_t>();
  for (int64_t i = 0; i < labels_.numel(); ++i) {
    XTRAIN_USAGE_CHECK(l[i] < num_classes, "data: ", what, ": label ", int(l[i]), " at index ", i,
                       " is outside [0, ", num_classes, ")");
  }
  for (int v = 0; v < 256; ++v) table_[v] = float((v / 255.0 - norm.mean) / norm.std);
}

Batch ImageDataset::collate(const std::vector<int64_t>& indices) const {
  const int64_t B = int64_t(indices.size()), H = images_.size(1), W = images_.size(2), N = size();
  at::Tensor input = at::empty({B, 1, H, W}, at::kFloat);
  at::Tensor target = at::empty({B}, at::kLong);
  float* x = input.data_ptr<float>();
  int64_t* y = target.data_ptr<int64_t>();
  const uint8_t* pixels = images_.data_ptr<uint8_t>();
  const uint8_t* labels = labels_.data_ptr<uint8_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = indices[b];
    TORCH_CHECK(0 <= i && i < N, "data: image sample index ", i, " out of range [0, ", N, ")");
    const uint8_t* src = pixels + i * H * W;
    float* dst = x + b * H * W;
    for (int64_t p = 0; p < H * W; ++p) dst[p] = table_[src[p]];
    y[b] = labels[i];
  }
  // Per batch, deterministic: ATen's CPU bilinear kernel (F.interpolate's, align_corners=False).
  if (resize_ > 0) input = at::upsample_bilinear2d(input, {resize_, resize_}, /*align_corners=*/false);
  return Batch{input, target};
}

DatasetInfo ImageDataset::info() const {
  DatasetInfo info;
  info.kind = "image";
  info.num_classes = num_classes_;
  info.sample_shape = resize_ > 0 ? std::vector<int64_t>{1, resize_, resize_}
                                  : std::vector<int64_t>{1, images_.size(1), images_.size(2)};
  return info;
}

}  // namespace xtrain::data
