#include "xtrain/zero/offload/uring_file.h"

#include <ATen/ops/from_blob.h>
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"

namespace xtrain::zero {
namespace {

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

bool aligned(const void* buf, int64_t bytes, int64_t offset) {
  return reinterpret_cast<uintptr_t>(buf) % kIoAlign == 0 && bytes % kIoAlign == 0 && offset % kIoAlign == 0;
}

}  // namespace

at::Tensor aligned_float_buffer(int64_t numel) {
  TORCH_INTERNAL_ASSERT(numel >= 0);
  const int64_t bytes = std::max<int64_t>(round_up(numel * 4, kIoAlign), kIoAlign);
  void* p = nullptr;
  TORCH_CHECK(posix_memalign(&p, kIoAlign, static_cast<size_t>(bytes)) == 0, "zero: cannot allocate ", bytes,
              " bytes of aligned I/O buffer");
  std::memset(p, 0, static_cast<size_t>(bytes));
  return at::from_blob(p, {numel}, [](void* q) { std::free(q); }, at::TensorOptions().dtype(at::kFloat));
}

void check_aio_options(const AioOptions& aio) {
  XTRAIN_USAGE_CHECK(aio.block_size > 0 && aio.block_size % kIoAlign == 0 && aio.block_size <= (1 << 30),
                     "aio: block_size must be a multiple of ", kIoAlign, " bytes in (0, 1 GiB], got ",
                     aio.block_size, " (aio.block_size)");
  XTRAIN_USAGE_CHECK(aio.queue_depth > 0 && aio.queue_depth <= 4096, "aio: queue_depth must be in [1, 4096], got ",
                     aio.queue_depth, " (aio.queue_depth)");
}

UringFile::UringFile(std::string path, const AioOptions& aio) : path_(std::move(path)), aio_(aio) {
  check_aio_options(aio_);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) {  // the filesystem refuses O_DIRECT (tmpfs before Linux 6.6)
    static std::once_flag warned;
    std::call_once(warned, [&] {
      log::warn("zero: ", path_, " does not support O_DIRECT; NVMe offload falls back to buffered I/O (page cache)");
    });
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  }
  TORCH_CHECK(fd_ >= 0, "zero: cannot open ", path_, ": ", std::strerror(errno));
  fd_buffered_ = direct_ ? ::open(path_.c_str(), O_RDWR | O_CLOEXEC) : fd_;
  if (fd_buffered_ < 0) {
    const int e = errno;
    ::close(fd_);
    TORCH_CHECK(false, "zero: cannot open ", path_, ": ", std::strerror(e));
  }
  ring_ = std::make_unique<io_uring>();
  const int rc = io_uring_queue_init(static_cast<unsigned>(aio_.queue_depth), ring_.get(), 0);
  if (rc < 0) {
    ring_.reset();
    if (fd_buffered_ != fd_) ::close(fd_buffered_);
    ::close(fd_);
    TORCH_CHECK(false, "zero: io_uring_queue_init(", aio_.queue_depth, ") failed: ", std::strerror(-rc));
  }
  thread_ = std::thread([this] { run(); });
}

UringFile::~UringFile() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
  io_uring_queue_exit(ring_.get());
  if (fd_buffered_ != fd_) ::close(fd_buffered_);
  ::close(fd_);
}

void UringFile::allocate(int64_t bytes, bool reserve) {
  if (reserve && ::fallocate(fd_, 0, 0, bytes) == 0) return;
  if (!reserve) {
    TORCH_CHECK(::ftruncate(fd_, bytes) == 0, "zero: cannot resize ", path_, " to ", bytes, " bytes: ", std::strerror(errno));
    return;
  }
  const int e = errno;
  TORCH_CHECK(e == EOPNOTSUPP || e == ENOSYS, "zero: cannot allocate ", bytes, " bytes for ", path_, ": ",
              std::strerror(e));
  TORCH_CHECK(::ftruncate(fd_, bytes) == 0, "zero: cannot resize ", path_, " to ", bytes, " bytes: ",
              std::strerror(errno));
}

int64_t UringFile::submit_read(void* buf, int64_t bytes, int64_t offset) {
  return submit(static_cast<char*>(buf), bytes, offset, false);
}

int64_t UringFile::submit_write(const void* buf, int64_t bytes, int64_t offset) {
  // io_uring only reads from `buf` for a write.
  return submit(static_cast<char*>(const_cast<void*>(buf)), bytes, offset, true);
}

int64_t UringFile::submit(char* buf, int64_t bytes, int64_t offset, bool write) {
  TORCH_INTERNAL_ASSERT(bytes >= 0 && offset >= 0);
  std::unique_lock<std::mutex> lock(mutex_);
  const int64_t ticket = next_ticket_++;
  auto& count = pending_[ticket];
  for (int64_t done = 0; done < bytes; done += aio_.block_size) {
    const int64_t n = std::min(aio_.block_size, bytes - done);
    queue_.push_back({ticket, buf + done, n, offset + done, write, !direct_ || !aligned(buf + done, n, offset + done)});
    ++count;
  }
  work_cv_.notify_one();
  if (!aio_.overlap_events) {  // done before returning; an error throws here and wait() is then a no-op
    done_cv_.wait(lock, [&] { return pending_[ticket] == 0 || !fatal_.empty(); });
    if (failed_.count(ticket) != 0 || !fatal_.empty()) wait_done(lock, ticket);
  }
  return ticket;
}

void UringFile::wait(int64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_done(lock, ticket);
}

void UringFile::wait_done(std::unique_lock<std::mutex>& lock, int64_t ticket) {
  auto it = pending_.find(ticket);
  TORCH_INTERNAL_ASSERT(it != pending_.end(), "zero: unknown or already waited I/O ticket ", ticket);
  done_cv_.wait(lock, [&] { return it->second == 0 || !fatal_.empty(); });
  TORCH_CHECK(fatal_.empty(), fatal_);
  pending_.erase(it);
  auto f = failed_.find(ticket);
  if (f == failed_.end()) return;
  const std::string msg = std::move(f->second);
  failed_.erase(f);
  TORCH_CHECK(false, msg);
}

void UringFile::run() noexcept {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (ready_.empty() && in_flight_ == 0) work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) {  // the owner is gone: nobody waits for queued requests, only in-flight ones matter
          queue_.clear();
          ready_.clear();
        }
        while (!queue_.empty()) {
          ready_.push_back(queue_.front());
          queue_.pop_front();
        }
        if (stop_ && in_flight_ == 0) return;
      }
      while (!ready_.empty() && in_flight_ < aio_.queue_depth) {
        push(new Request(ready_.front()));
        ready_.pop_front();
      }
      flush();
      if (in_flight_ > 0) reap_one();
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    fatal_ = c10::str("zero: I/O on ", path_, " stopped: ", e.what());
    done_cv_.notify_all();
  }
}

void UringFile::push(Request* r) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) {  // the submission ring is full of queued entries: hand them to the kernel
    flush();
    sqe = io_uring_get_sqe(ring_.get());
  }
  TORCH_INTERNAL_ASSERT(sqe != nullptr);
  const int fd = r->buffered ? fd_buffered_ : fd_;
  if (r->write) {
    io_uring_prep_write(sqe, fd, r->buf, static_cast<unsigned>(r->bytes), static_cast<uint64_t>(r->offset));
  } else {
    io_uring_prep_read(sqe, fd, r->buf, static_cast<unsigned>(r->bytes), static_cast<uint64_t>(r->offset));
  }
  io_uring_sqe_set_data(sqe, r);
  ++in_flight_;
  ++unsubmitted_;
  if (aio_.single_submit) flush();
}

void UringFile::flush() {
  while (unsubmitted_ > 0) {
    const int rc = io_uring_submit(ring_.get());
    if (rc == -EINTR || rc == -EAGAIN) continue;
    TORCH_CHECK(rc >= 0, "io_uring_submit failed: ", std::strerror(-rc));
    unsubmitted_ = 0;
  }
}

void UringFile::reap_one() {
  io_uring_cqe* cqe = nullptr;
  int rc;
  do {
    rc = io_uring_wait_cqe(ring_.get(), &cqe);
  } while (rc == -EINTR);
  TORCH_CHECK(rc == 0, "io_uring_wait_cqe failed: ", std::strerror(-rc));
  std::unique_ptr<Request> r(static_cast<Request*>(io_uring_cqe_get_data(cqe)));
  const int res = cqe->res;
  io_uring_cqe_seen(ring_.get(), cqe);
  --in_flight_;
  const char* what = r->write ? "write" : "read";
  if (res > 0 && res < r->bytes) {  // partial transfer: the rest next (maybe unaligned now)
    Request rest = *r;
    rest.buf += res;
    rest.bytes -= res;
    rest.offset += res;
    rest.buffered = !direct_ || !aligned(rest.buf, rest.bytes, rest.offset);
    ready_.push_front(rest);
    return;
  }
  if (res < 0) {
    finish(*r, c10::str("zero: ", what, " of ", r->bytes, " bytes at offset ", r->offset, " of ", path_, " failed: ",
                        std::strerror(-res)));
  } else if (res == 0 && r->bytes > 0) {
    finish(*r, c10::str("zero: short ", what, ": 0 of ", r->bytes, " bytes at offset ", r->offset, " of ", path_,
                        " (end of file)"));
  } else {
    finish(*r, "");
  }
}

void UringFile::finish(const Request& r, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error.empty() && failed_[r.ticket].empty()) failed_[r.ticket] = error;
  auto it = pending_.find(r.ticket);
  TORCH_INTERNAL_ASSERT(it != pending_.end() && it->second > 0);
  if (--it->second == 0) done_cv_.notify_all();
}

}  // namespace xtrain::zero
