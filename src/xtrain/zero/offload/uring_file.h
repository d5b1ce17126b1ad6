// One file read and written through io_uring (liburing), as DeepSpeed's aio handle does with libaio:
// an operation of any size is split into `aio.block_size` requests with at most `aio.queue_depth`
// in flight. O_DIRECT with 4096-aligned memory (AlignedBuffer); where the filesystem refuses
// O_DIRECT the file is opened buffered, with one warning per process. A request whose offset, size
// or memory is not 4096-aligned (an odd-sized tail) goes through a second, buffered descriptor.
#pragma once
#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "xtrain/zero/options.h"

struct io_uring;

namespace xtrain::zero {

constexpr int64_t kIoAlign = 4096;  // bytes: O_DIRECT offset, size and memory alignment

// fp32 tensor of `numel` elements over posix_memalign'd memory (freed with the last reference),
// zero-filled, with its byte size rounded up to kIoAlign.
at::Tensor aligned_float_buffer(int64_t numel);

// UsageError unless aio.block_size is a positive multiple of kIoAlign and aio.queue_depth positive.
void check_aio_options(const AioOptions& aio);

// One I/O thread per file owns the ring (DeepSpeed's aio handle runs its I/O on threads too), so
// submit_* returns at once and the caller computes while up to queue_depth requests are in flight;
// aio.intra_op_parallelism > 1 is accepted as 1.
class UringFile {
 public:
  // Opens (creating when needed) `path`. aio.single_submit: one io_uring_submit per request instead
  // of one per batch. aio.overlap_events=false: every operation completes before submit_* returns.
  UringFile(std::string path, const AioOptions& aio);
  ~UringFile();  // waits for requests in flight (drops queued ones), then closes
  UringFile(const UringFile&) = delete;
  UringFile& operator=(const UringFile&) = delete;

  // Sets the file's size: reserve = fallocate (ftruncate where unsupported), else a sparse file
  // whose blocks are taken as it is written.
  void allocate(int64_t bytes, bool reserve = true);

  // Queue an operation of `bytes` at `offset` and return its ticket; wait(ticket) until it is done.
  // Errors (ENOSPC, EIO, a short transfer at end of file) throw from wait() with path and offset.
  // One thread calls these (the owner); the memory must stay valid until the wait.
  int64_t submit_read(void* buf, int64_t bytes, int64_t offset);
  int64_t submit_write(const void* buf, int64_t bytes, int64_t offset);
  void wait(int64_t ticket);
  void read(void* buf, int64_t bytes, int64_t offset) { wait(submit_read(buf, bytes, offset)); }
  void write(const void* buf, int64_t bytes, int64_t offset) { wait(submit_write(buf, bytes, offset)); }

  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }  // O_DIRECT in use

 private:
  struct Request {
    int64_t ticket;
    char* buf;
    int64_t bytes, offset;
    bool write, buffered;
  };
  int64_t submit(char* buf, int64_t bytes, int64_t offset, bool write);
  void wait_done(std::unique_lock<std::mutex>& lock, int64_t ticket);  // throws the ticket's error
  // The I/O thread: moves queued requests into the ring (at most queue_depth in flight), reaps
  // completions, resubmits partial transfers, records errors.
  void run() noexcept;
  void push(Request* r);
  void reap_one();
  void flush();
  void finish(const Request& r, const std::string& error);

  std::string path_;
  AioOptions aio_;
  int fd_ = -1, fd_buffered_ = -1;
  bool direct_ = false;
  std::unique_ptr<io_uring> ring_;
  // Guarded by mutex_.
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Request> queue_;
  std::map<int64_t, int64_t> pending_;     // ticket -> requests not yet complete
  std::map<int64_t, std::string> failed_;  // ticket -> first error
  std::string fatal_;                      // the ring itself failed; every wait throws this
  bool stop_ = false;
  int64_t next_ticket_ = 1;
  // The I/O thread's own.
  std::deque<Request> ready_;
  int64_t in_flight_ = 0, unsubmitted_ = 0;
  std::thread thread_;
};

}  // namespace xtrain::zero
