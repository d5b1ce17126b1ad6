// Byte-level language-model windows over one split [begin, end) of a memory-mapped corpus: sample i
// is input = bytes[begin+i, begin+i+T), target = the same window shifted by one byte. Every
// offset is a sample (size = split length − T), so a "epoch" sees each byte position once.
#pragma once
#include <memory>

#include "xtrain/data/dataset.h"
#include "xtrain/data/mapped_file.h"

namespace xtrain::data {

class TextDataset : public Dataset {
 public:
  // `split` names the split in errors ("train" / "val"); UsageError when the split holds fewer
  // than T + 1 bytes.
  TextDataset(std::shared_ptr<const MappedFile> file, int64_t begin, int64_t end, int64_t seq_len,
              const std::string& split);
  int64_t size() const override { return end_ - begin_ - seq_len_; }
  // input and target int64 [B, T], both views of one [2, B, T] allocation.
  Batch collate(const std::vector<int64_t>& indices) const override;
  DatasetInfo info() const override;

 private:
  std::shared_ptr<const MappedFile> file_;
  int64_t begin_, end_, seq_len_;
};

}  // namespace xtrain::data
