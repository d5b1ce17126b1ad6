// One rank's shard of the fp32 master weights and optimizer moments kept on NVMe (DeepSpeed's
// `offload_optimizer.device: "nvme"`), stepped chunk by chunk with the fused in-memory optimizer:
// while chunk k is stepped on the calling thread, chunk k+1 is read and chunk k-1 written through
// io_uring (three chunk buffers; one, serial, when aio.overlap_events is false).
//
// On disk: one file per instance, <nvme_path>/xtrain_rank<r>_<pid>/optimizer<n>.bin (n counts
// instances in the process), removed with the object. With C = chunk_numel() (sub_group_size
// rounded up to 1024 elements, so every array starts 4096-aligned; to 2048 for the 8-bit state,
// so its quantisation blocks are the shard's) and S = state_names().size(), every chunk holds 1+S
// arrays back to back, each padded to 4096 bytes: the fp32 master weights (C elements), then each
// state in state_names() order as the optimizer keeps it for C elements (fp32 moments: C floats;
// 8-bit Adam: C int8/uint8 codes and C/2048 fp32 absmax per moment, ~4x fewer bytes). Elements past
// numel in the last chunk are zero padding. Host byte order; no header.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/optim/optimizer.h"
#include "xtrain/optim/options.h"
#include "xtrain/zero/options.h"

namespace xtrain::zero {

class UringFile;

// Test hook: when set, the free-space check uses this many bytes instead of statvfs's.
constexpr const char* kNvmeFakeFreeBytesEnv = "XTRAIN_NVME_FAKE_FREE_BYTES";

class NvmeOptimizerState {
 public:
  // Creates the folder and the file and checks the space (UsageError naming the key otherwise).
  NvmeOptimizerState(std::string nvme_path, int64_t rank, int64_t numel, const optim::OptimizerOptions& optimizer,
                     const OffloadOptimizerOptions& offload, const AioOptions& aio, int64_t sub_group_size);
  ~NvmeOptimizerState();
  NvmeOptimizerState(const NvmeOptimizerState&) = delete;
  NvmeOptimizerState& operator=(const NvmeOptimizerState&) = delete;

  void initialize(const at::Tensor& master);  // fp32 [numel]; the moments start at zero

  // (offset into the shard, updated fp32 master values [len]): called on the calling thread for
  // each chunk in order, before the chunk is written back; the tensor is only valid during the call.
  using ChunkSink = std::function<void(int64_t, const at::Tensor&)>;
  // One optimizer step over the whole shard: `in` as for optim::Optimizer::step with params and
  // params_lowp undefined, grads [numel] (fp32/bf16/fp16), segments relative to the shard. An I/O
  // error throws and leaves the state undefined (resume from a checkpoint).
  void step(const optim::StepInputs& in, const ChunkSink& on_chunk);
  void step(const optim::StepInputs& in, const at::Tensor& params_out);  // params_out [numel], any dtype

  // Whole tensors: "master" (fp32 [numel]) or a state name, in the optimizer's dtype and length for
  // numel elements (checkpoints; not during step()).
  at::Tensor read(const std::string& name) const;
  void write(const std::string& name, const at::Tensor& t);
  // Elements [offset, offset + values.numel()) of one array (a fresh file holds zeros, so this
  // initialises the master shard piece by piece without a whole-shard tensor).
  void write_range(const std::string& name, int64_t offset, const at::Tensor& values);

  std::vector<std::string> state_names() const { return state_names_; }
  const std::string& optimizer_name() const { return optimizer_name_; }
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t n) { step_count_ = n; }

  int64_t numel() const { return numel_; }
  int64_t chunk_numel() const { return chunk_; }
  int64_t num_chunks() const { return (numel_ + chunk_ - 1) / chunk_; }
  const std::string& file_path() const { return file_path_; }
  bool direct_io() const;
  int64_t disk_bytes() const { return num_chunks() * chunk_bytes(); }
  int64_t buffer_bytes() const;  // the chunk buffers in memory
  int64_t buffer_master_bytes() const { return static_cast<int64_t>(buffers_.size()) * chunk_ * 4; }

  // Of the last step(): bytes moved; seconds the calling thread waited for reads / writes (with
  // overlap, only the part the step did not hide), spent in the optimizer, and in all.
  struct IoStats {
    int64_t bytes_read = 0, bytes_written = 0;
    double read_s = 0, write_s = 0, step_s = 0, total_s = 0;
  };
  IoStats last_step_stats() const { return stats_; }

 private:
  int64_t chunk_bytes() const { return array_offset_.back(); }
  int64_t chunk_len(int64_t k) const { return std::min(chunk_, numel_ - k * chunk_); }
  int64_t array_numel(size_t j, int64_t k) const;  // elements of array j (0: master) in chunk k
  void bind_state(optim::Optimizer& opt, const at::Tensor& buf) const;
  int64_t array_index(const std::string& name) const;
  void remove_files() noexcept;
  void plan_arrays();  // state_names_ and the array layout, from full_ and tail_
  void step_chunk(const optim::StepInputs& in, int64_t k, const at::Tensor& buf, const ChunkSink& on_chunk);

  int64_t numel_ = 0, chunk_ = 0, step_count_ = 0;
  optim::OptimizerOptions options_;
  std::string optimizer_name_, folder_, file_path_;
  std::vector<std::string> state_names_;
  // Per array (0: master, then the states): byte offset in a chunk (plus the chunk's end), dtype,
  // and elements in a full chunk and in the shorter last one.
  std::vector<int64_t> array_offset_, full_numel_, tail_numel_;
  std::vector<at::ScalarType> array_dtype_;
  std::vector<at::Tensor> buffers_;  // each (1+S)·C fp32, 4096-aligned
  // Steppers: the fused optimizers with their state re-pointed at a buffer's arrays (full chunks
  // and, when numel is not a multiple of C, the shorter last one).
  std::unique_ptr<optim::Optimizer> full_, tail_;
  std::unique_ptr<UringFile> file_;  // after buffers_: destroyed (in-flight I/O drained) first
  IoStats stats_;
};

}  // namespace xtrain::zero
