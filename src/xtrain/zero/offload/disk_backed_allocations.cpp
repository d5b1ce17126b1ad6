#include "xtrain/zero/offload/disk_backed_allocations.h"

#include <c10/core/Allocator.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/base/log.h"

namespace xtrain::zero {

namespace {
std::atomic<int64_t> g_live_bytes{0};
}

int64_t disk_backed_live_bytes() { return g_live_bytes.load(); }

int64_t disk_backed_bytes_freed_on_node() {
  return disk_backed_live_bytes() * std::max<int64_t>(1, env::get_int_or("LOCAL_WORLD_SIZE", 1));
}

struct DiskBackedAllocations::Impl : c10::Allocator {
  std::string dir;
  int64_t min_bytes = 0;
  c10::Allocator* previous = nullptr;
  std::atomic<int64_t> blocks{0}, bytes{0};

  struct Block {
    void* ptr;
    size_t size;
  };
  static void unmap(void* ctx) {
    auto* b = static_cast<Block*>(ctx);
    ::munmap(b->ptr, b->size);
    g_live_bytes -= static_cast<int64_t>(b->size);
    delete b;
  }

  int open_unlinked() const {
    int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    std::string path = dir + "/xtrain_construct_XXXXXX";  // filesystems without O_TMPFILE
    fd = ::mkstemp(path.data());
    if (fd >= 0) ::unlink(path.c_str());
    return fd;
  }

  c10::DataPtr allocate(size_t n) const override {
    if (static_cast<int64_t>(n) < min_bytes) return previous->allocate(n);
    const int fd = open_unlinked();
    XTRAIN_USAGE_CHECK(fd >= 0, "zero: cannot create a file in ", dir, " for a ", n, "-byte parameter block: ",
                       std::strerror(errno), " (zero_optimization.offload_param.nvme_path)");
    if (::ftruncate(fd, static_cast<off_t>(n)) != 0) {
      const int err = errno;
      ::close(fd);
      XTRAIN_USAGE_ERROR("zero: cannot size a ", n, "-byte file in ", dir, ": ", std::strerror(err));
    }
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    XTRAIN_USAGE_CHECK(p != MAP_FAILED, "zero: cannot map a ", n, "-byte file in ", dir, ": ", std::strerror(errno));
    auto* self = const_cast<Impl*>(this);
    ++self->blocks;
    self->bytes += static_cast<int64_t>(n);
    g_live_bytes += static_cast<int64_t>(n);
    return {p, new Block{p, n}, &unmap, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

// impl_ is never freed: a storage remembers the allocator that made it (for resize_), so it must
// outlive every block.
void check_nvme_folder(const std::string& path, const std::string& key) {
  const auto short_key = key.substr(key.find('.') + 1);  // "offload_param.nvme_path"
  XTRAIN_USAGE_CHECK(!path.empty(), "zero: ", short_key.substr(0, short_key.find('.')), ".device nvme needs ",
                     short_key, " (", key, ")");
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return;
  // A missing folder is created at start; it can be only under a writable folder.
  auto ancestor = std::filesystem::absolute(path, ec).parent_path();
  while (!ancestor.empty() && !std::filesystem::exists(ancestor, ec) && ancestor != ancestor.parent_path()) {
    ancestor = ancestor.parent_path();
  }
  XTRAIN_USAGE_CHECK(std::filesystem::is_directory(ancestor, ec), "zero: ", short_key, " \"", path,
                     "\" does not exist and cannot be created: ", ancestor.string(), " is not a folder (", key, ")");
  XTRAIN_USAGE_CHECK(::access(ancestor.c_str(), W_OK | X_OK) == 0, "zero: ", short_key, " \"", path,
                     "\" does not exist and cannot be created: ", ancestor.string(), " is not writable (", key, ")");
}

void require_nvme_folder(const std::string& path, const std::string& key) {
  check_nvme_folder(path, key);
  const auto short_key = key.substr(key.find('.') + 1);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    std::filesystem::create_directories(path, ec);
    XTRAIN_USAGE_CHECK(!ec, "zero: ", short_key, " \"", path, "\" does not exist and cannot be created: ",
                       ec.message(), " (", key, ")");
    log::warn("zero: ", short_key, " \"", path, "\" did not exist; created it, as DeepSpeed does (", key,
              "); if an existing NVMe folder was meant, check the path");
  }
  XTRAIN_USAGE_CHECK(std::filesystem::is_directory(path, ec), "zero: ", short_key, " \"", path,
                     "\" is not a folder (", key, ")");
  XTRAIN_USAGE_CHECK(::access(path.c_str(), W_OK | X_OK) == 0, "zero: ", short_key, " \"", path,
                     "\" is not writable: ", std::strerror(errno), " (", key, ")");
}

DiskBackedAllocations::DiskBackedAllocations(const std::string& dir, int64_t min_bytes) : impl_(new Impl) {
  require_nvme_folder(dir, "zero_optimization.offload_param.nvme_path");
  impl_->dir = dir;
  impl_->min_bytes = min_bytes;
  previous_ = c10::GetAllocator(c10::DeviceType::CPU);
  impl_->previous = previous_;
  c10::SetAllocator(c10::DeviceType::CPU, impl_, /*priority=*/255);
}

DiskBackedAllocations::~DiskBackedAllocations() { c10::SetAllocator(c10::DeviceType::CPU, previous_, 255); }

int64_t DiskBackedAllocations::blocks() const { return impl_->blocks; }
int64_t DiskBackedAllocations::bytes() const { return impl_->bytes; }

}  // namespace xtrain::zero
