// `zero_optimization` (with `offload_optimizer`, `offload_param`) and `aio` — DeepSpeed's keys and
// code defaults (reference/deepspeed.md §a.7–a.8). Element counts, not bytes.
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::zero {

struct OffloadOptimizerOptions {
  std::string device = "none";
  std::string nvme_path;
  bool pin_memory = false;
  int64_t buffer_count = 4;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;
  template <class V>
  void visit(V& v) {
    v.choice("device", device, {"none", "cpu", "nvme"}, "where the optimizer state lives");
    v("nvme_path", nvme_path, "folder for the optimizer-state files (device nvme; created with a warning if missing), removed at exit");
    v("pin_memory", pin_memory, "page-locked staging buffers (CUDA builds)");
    v("buffer_count", buffer_count, "accepted; device nvme uses three chunk buffers (read, step, write)");
    v("pipeline_read", pipeline_read, "accepted; nvme reads overlap the step unless aio.overlap_events=false");
    v("pipeline_write", pipeline_write, "accepted; nvme writes overlap the step unless aio.overlap_events=false");
    v("fast_init", fast_init, "accepted for compatibility");
    v("ratio", ratio, "fraction of the step run on the CPU (1.0 only: every step runs on the CPU here)");
  }
};

struct OffloadParamOptions {
  std::string device = "none";
  std::string nvme_path;
  bool pin_memory = false;
  int64_t buffer_count = 5;
  int64_t buffer_size = 100000000;
  int64_t max_in_cpu = 1000000000;
  template <class V>
  void visit(V& v) {
    v.choice("device", device, {"none", "cpu", "nvme"}, "where stage-3 parameter partitions live");
    v("nvme_path", nvme_path, "folder for the parameter-shard files (device nvme; created with a warning if missing); the model is also built there, in file-backed memory, before it is partitioned");
    v("pin_memory", pin_memory, "page-locked staging buffers (CUDA builds)");
    v("buffer_count", buffer_count, "accepted; a unit's shard is read when it is gathered");
    v("buffer_size", buffer_size, "accepted; see buffer_count");
    v("max_in_cpu", max_in_cpu, "accepted; parameter shards on NVMe are not cached in memory");
  }
};

struct ZeroOptions {
  int64_t stage = 0;
  int overlap_comm = -1;  // -1: unset (true for stage 3, false otherwise); 0/1 as given
  bool contiguous_gradients = true;
  int64_t reduce_bucket_size = 500000000;
  int64_t allgather_bucket_size = 500000000;
  bool allgather_partitions = true;
  bool reduce_scatter = true;
  bool use_multi_rank_bucket_allreduce = true;
  bool load_from_fp32_weights = true;
  bool elastic_checkpoint = false;
  bool round_robin_gradients = false;
  bool ignore_unused_parameters = true;
  int64_t sub_group_size = 1000000000;
  int64_t stage3_prefetch_bucket_size = 50000000;
  int64_t stage3_param_persistence_threshold = 100000;
  int64_t stage3_model_persistence_threshold = INT64_MAX;
  int64_t stage3_max_live_parameters = 1000000000;
  int64_t stage3_max_reuse_distance = 1000000000;
  bool stage3_gather_16bit_weights_on_model_save = false;
  int64_t stage3_module_granularity_threshold = 0;
  bool stage3_use_all_reduce_for_fetch_params = false;
  int64_t zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_nontrainable_weights = false;
  bool zero_quantized_gradients = false;
  int64_t mics_shard_size = -1;
  bool memory_efficient_linear = true;
  OffloadOptimizerOptions offload_optimizer;
  OffloadParamOptions offload_param;

  bool overlap() const { return overlap_comm < 0 ? stage == 3 : overlap_comm != 0; }

  template <class V>
  void visit(V& v) {
    v.alias("cpu_offload", "offload_optimizer.device", "cpu");
    v.alias("cpu_offload_param", "offload_param.device", "cpu");
    v.alias("cpu_offload_use_pin_memory", "offload_optimizer.pin_memory", "");
    v.alias("prefetch_bucket_size", "stage3_prefetch_bucket_size", "");
    v.alias("param_persistence_threshold", "stage3_param_persistence_threshold", "");
    v.alias("max_live_parameters", "stage3_max_live_parameters", "");
    v.alias("max_reuse_distance", "stage3_max_reuse_distance", "");
    v.alias("gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save", "");
    v.alias("stage3_gather_fp16_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save", "");
    v("stage", stage, "0 off; 1 optimizer state, 2 + gradients, 3 + parameters partitioned");
    v.tristate("overlap_comm", overlap_comm, "overlap gradient reduction with backward (default: stage 3)");
    v("contiguous_gradients", contiguous_gradients, "no effect: gradients always live in, or are copied into, flat buffers");
    v("reduce_bucket_size", reduce_bucket_size, "elements per gradient reduction bucket");
    v("allgather_bucket_size", allgather_bucket_size, "stages 1/2: the post-step parameter gather in max(1, shard*W/size) pieces (DeepSpeed's arithmetic; even)");
    v("allgather_partitions", allgather_partitions, "stages 1/2: gather parameters by all-gather (true) or one broadcast per rank (false)");
    v("reduce_scatter", reduce_scatter, "stages 1-3: reduce-scatter gradients (true) or all-reduce them and keep this rank's part (false)");
    v("use_multi_rank_bucket_allreduce", use_multi_rank_bucket_allreduce, "accepted for compatibility");
    v("load_from_fp32_weights", load_from_fp32_weights, "on load, fp32 master weights from the checkpoint (true) or from the model's 16-bit weights (false)");
    v("elastic_checkpoint", elastic_checkpoint, "accepted; xtrain checkpoints always reshard");
    v("round_robin_gradients", round_robin_gradients, "accepted for compatibility");
    v("ignore_unused_parameters", ignore_unused_parameters, "stages 1/2: false makes a parameter without a gradient in a step an error naming it");
    v("sub_group_size", sub_group_size, "elements per optimizer sub-group (NVMe chunk, rounded up to 1024)");
    v("stage3_prefetch_bucket_size", stage3_prefetch_bucket_size, "elements of the next units gathered ahead");
    v("stage3_param_persistence_threshold", stage3_param_persistence_threshold, "parameters of at most this many elements stay whole on every rank");
    v("stage3_model_persistence_threshold", stage3_model_persistence_threshold, "accepted; persistent parameters are not capped");
    v("stage3_max_live_parameters", stage3_max_live_parameters, "gathered elements resident at most (prefetch stops there; the unit in use is always gathered)");
    v("stage3_max_reuse_distance", stage3_max_reuse_distance, "accepted; a unit is released after every use");
    v("stage3_gather_16bit_weights_on_model_save", stage3_gather_16bit_weights_on_model_save, "accepted; `xtrain ckpt consolidate` writes the whole model");
    v("stage3_module_granularity_threshold", stage3_module_granularity_threshold, "accepted for compatibility");
    v("stage3_use_all_reduce_for_fetch_params", stage3_use_all_reduce_for_fetch_params, "accepted for compatibility");
    v("zero_hpz_partition_size", zero_hpz_partition_size, "ZeRO++ (not supported)");
    v("zero_quantized_weights", zero_quantized_weights, "ZeRO++ (not supported)");
    v("zero_quantized_nontrainable_weights", zero_quantized_nontrainable_weights, "ZeRO++ (not supported)");
    v("zero_quantized_gradients", zero_quantized_gradients, "ZeRO++ (not supported)");
    v("mics_shard_size", mics_shard_size, "MiCS (not supported)");
    v("memory_efficient_linear", memory_efficient_linear, "accepted for compatibility");
    v("offload_optimizer", offload_optimizer, "optimizer state offload");
    v("offload_param", offload_param, "stage-3 parameter offload");
  }
};

struct AioOptions {
  int64_t block_size = 1048576;
  int64_t queue_depth = 8;
  int64_t intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;
  template <class V>
  void visit(V& v) {
    v.alias("thread_count", "intra_op_parallelism", "");
    v("block_size", block_size, "bytes per I/O request (a multiple of 4096)");
    v("queue_depth", queue_depth, "requests in flight");
    v("intra_op_parallelism", intra_op_parallelism, "accepted; one io_uring thread per NVMe state file");
    v("single_submit", single_submit, "one io_uring_submit per request instead of per batch");
    v("overlap_events", overlap_events, "overlap NVMe reads and writes with the optimizer step (false: in order)");
    v("use_gds", use_gds, "GPUDirect Storage (needs CUDA: not supported)");
  }
};

}  // namespace xtrain::zero
