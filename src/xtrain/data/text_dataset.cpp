// TextDataset: windows copied byte → int64 with a plain loop into one preallocated tensor.
#include "xtrain/data/text_dataset.h"

#include <ATen/ops/empty.h>

#include "xtrain/base/error.h"

namespace xtrain::data {

TextDataset::TextDataset(std::shared_ptr<const MappedFile> file, int64_t begin, int64_t end, int64_t seq_len,
                         const std::string& split)
    : file_(std::move(file)), begin_(begin), end_(end), seq_len_(seq_len) {
  TORCH_INTERNAL_ASSERT(file_ && 0 <= begin && begin <= end && end <= file_->size());
  XTRAIN_USAGE_CHECK(seq_len > 0, "data: seq_len must be > 0, got ", seq_len, " (xtrain.model.seq_len)");
  XTRAIN_USAGE_CHECK(end - begin > seq_len, "data: the ", split, " split of ", file_->path(), " has ", end - begin,
                     " bytes, too short for seq_len ", seq_len, " (it needs at least seq_len + 1 = ", seq_len + 1,
                     "; use a longer text, a smaller xtrain.model.seq_len or another xtrain.data.val_fraction)");
}

Batch TextDataset::collate(const std::vector<int64_t>& indices) const {
  const int64_t B = int64_t(indices.size()), T = seq_len_;
  at::Tensor both = at::empty({2, B, T}, at::kLong);
  int64_t* input = both.data_ptr<int64_t>();
  int64_t* target = input + B * T;
  const uint8_t* bytes = file_->data() + begin_;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = indices[b];
    TORCH_CHECK(0 <= i && i < size(), "data: text sample index ", i, " out of range [0, ", size(), ")");
    const uint8_t* window = bytes + i;
    for (int64_t t = 0; t < T; ++t) input[b * T + t] = window[t];
    for (int64_t t = 0; t < T; ++t) target[b * T + t] = window[t + 1];
  }
  return Batch{both[0], both[1]};
}

DatasetInfo TextDataset::info() const {
  DatasetInfo info;
  info.kind = "text";
  info.vocab = 256;
  info.seq_len = seq_len_;
  return info;
}

}  // namespace xtrain::data
