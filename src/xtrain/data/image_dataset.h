// Labelled u8 images held in memory (MNIST-sized: 47 MB for 60000 28×28), normalised at collate
// time with the dataset's per-pixel mean/std through a 256-entry lookup table, so the stored copy
// stays 1 byte per pixel.
#pragma once
#include "xtrain/data/dataset.h"

namespace xtrain::data {

struct ImageNormalisation {
  double mean = 0.0;  // of pixel / 255 over the training set
  double std = 1.0;
};

class ImageDataset : public Dataset {
 public:
  // images u8 [N, H, W], labels u8 [N]; `what` names the files in errors. UsageError when the
  // counts differ or a label is >= num_classes. resize > 0: batches are resize x resize, upsampled
  // (or downsampled) from the normalised images by bilinear interpolation (xtrain.data.image_size).
  ImageDataset(at::Tensor images, at::Tensor labels, ImageNormalisation norm, int64_t num_classes,
               const std::string& what, int64_t resize = 0);
  int64_t size() const override { return images_.size(0); }
  // input float32 [B, 1, H, W] = (pixel / 255 − mean) / std (then resized); target int64 [B].
  Batch collate(const std::vector<int64_t>& indices) const override;
  DatasetInfo info() const override;

 private:
  at::Tensor images_, labels_;
  float table_[256];
  int64_t num_classes_;
  int64_t resize_ = 0;
};

}  // namespace xtrain::data
