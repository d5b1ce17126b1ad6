// A read-only memory map of a whole file (mmap, MAP_PRIVATE): the text corpus is read through the
// page cache, never copied into the heap, and shared by the train and val splits.
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::data {

class MappedFile {
 public:
  // UsageError when the file cannot be opened or is empty.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace xtrain::data
