// MappedFile: open, fstat, mmap(PROT_READ), close the descriptor (the mapping keeps the file).
#include "xtrain/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "xtrain/base/error.h"

namespace xtrain::data {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  XTRAIN_USAGE_CHECK(fd >= 0, "data: cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    const bool regular = S_ISREG(st.st_mode);
    ::close(fd);
    XTRAIN_USAGE_ERROR("data: ", path, regular ? " is empty" : " is not a regular file");
  }
  void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);
  XTRAIN_USAGE_CHECK(p != MAP_FAILED, "data: cannot map ", path, ": ", std::strerror(mmap_errno));
  data_ = static_cast<const uint8_t*>(p);
  size_ = int64_t(st.st_size);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_t(size_));
}

}  // namespace xtrain::data
