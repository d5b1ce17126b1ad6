// The two ShardedOptimizerState implementations: the fused optimizer over a master shard in memory
// (offload_optimizer.device none or cpu: on this CPU build both keep the state in host memory), and
// NvmeOptimizerState's file stepped chunk by chunk.
#include "xtrain/zero/optimizer_state.h"

#include <ATen/Functions.h>

#include "xtrain/zero/offload/nvme_optimizer.h"
#include "xtrain/zero/shard_ops.h"
#include "xtrain/zero/whole_state_io.h"

namespace xtrain::zero {
namespace {

class InMemoryState : public ShardedOptimizerState {
 public:
  InMemoryState(const optim::OptimizerOptions& optimizer, int64_t numel, bool cpu_offload)
      : master_(at::empty({numel}, at::kFloat)), optimizer_(optim::make_optimizer(optimizer)), cpu_(cpu_offload) {
    optimizer_->init_state(numel);
  }
  void initialize(int64_t local, const at::Tensor& values) override {
    master_.narrow(0, local, values.numel()).copy_(values);
  }
  void step(const at::Tensor& grads, const std::vector<optim::Segment>& segments, const StepHyper& hyper,
            const UpdatedSink& updated) override {
    optimizer_->step(shard_step_inputs(master_, grads, segments, hyper));
    updated(0, master_);
  }
  NamedBuffers buffers(bool with_optimizer) const override {
    NamedBuffers out{{"master", master_}};
    if (with_optimizer) {
      for (auto& [name, t] : optimizer_->state()) out.emplace_back(name, t);
    }
    return out;
  }
  void store(const NamedBuffers& /*buffers*/) override {}  // they are the state itself
  std::string optimizer_name() const override { return optimizer_->name(); }
  int64_t step_count() const override { return optimizer_->step_count(); }
  void set_step_count(int64_t n) override { optimizer_->set_step_count(n); }
  void account(MemoryReport& r) const override {
    r.master_bytes += tensor_bytes(master_);
    for (auto& [name, t] : optimizer_->state()) r.optimizer_bytes += tensor_bytes(t);
  }
  std::string describe() const override { return cpu_ ? "; optimizer state and step on the CPU" : ""; }
  at::Tensor resident_master() const override { return master_; }

 private:
  at::Tensor master_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  bool cpu_;
};

class NvmeState : public ShardedOptimizerState {
 public:
  NvmeState(const StrategyOptions& o, int64_t rank, int64_t numel)
      : nvme_(o.zero.offload_optimizer.nvme_path, rank, numel, o.optimizer, o.zero.offload_optimizer, o.aio,
              o.zero.sub_group_size) {}
  void initialize(int64_t local, const at::Tensor& values) override { nvme_.write_range("master", local, values); }
  void step(const at::Tensor& grads, const std::vector<optim::Segment>& segments, const StepHyper& hyper,
            const UpdatedSink& updated) override {
    nvme_.step(shard_step_inputs(at::Tensor(), grads, segments, hyper), updated);  // the master comes from disk
  }
  NamedBuffers buffers(bool with_optimizer) const override {
    NamedBuffers out{{"master", nvme_.read("master")}};
    if (with_optimizer) {
      for (const auto& name : nvme_.state_names()) out.emplace_back(name, nvme_.read(name));
    }
    return out;
  }
  void store(const NamedBuffers& buffers) override {
    for (const auto& [name, t] : buffers) nvme_.write(name, t);
  }
  std::string optimizer_name() const override { return nvme_.optimizer_name(); }
  int64_t step_count() const override { return nvme_.step_count(); }
  void set_step_count(int64_t n) override { nvme_.set_step_count(n); }
  void account(MemoryReport& r) const override {  // in memory only the chunk buffers: master and state arrays
    const int64_t master = nvme_.buffer_master_bytes();
    r.master_bytes += master;
    r.optimizer_bytes += nvme_.buffer_bytes() - master;
    r.disk_bytes += nvme_.disk_bytes();
  }
  std::string describe() const override {
    return c10::str("; fp32 master and optimizer state (", nvme_.disk_bytes(), " bytes) on NVMe in ", nvme_.file_path(),
                    nvme_.direct_io() ? "" : " (buffered I/O)", ", stepped in ", nvme_.num_chunks(), " chunks of ",
                    nvme_.chunk_numel(), " elements");
  }

 private:
  NvmeOptimizerState nvme_;
};

}  // namespace

std::map<std::string, at::Tensor> load_state(const checkpoint::CheckpointReader& reader, bool load_optimizer,
                                             const ShardLayout& layout, int64_t rank, const StrategyOptions& options,
                                             ShardedOptimizerState& state) {
  const auto buffers = state.buffers(load_optimizer);
  const NamedBuffers master(buffers.begin(), buffers.begin() + 1), moments(buffers.begin() + 1, buffers.end());
  const bool whole = is_whole_state(moments, layout.shard_numel());
  if (load_optimizer && !whole) refuse_whole_state_checkpoint(reader);
  const auto full = consolidate(reader, load_optimizer && !whole);
  load_shards(full, layout, rank, whole ? master : buffers);
  if (whole) {
    const auto expected = state_layout(layout.world_size(), layout.shard_numel(), layout.fragments(rank));
    load_whole_state(reader, rank, expected, moments);
  }
  if (!options.zero.load_from_fp32_weights) round_master(buffers, options.param_dtype);
  state.store(buffers);
  return {full.model.begin(), full.model.end()};
}

void save_state(checkpoint::CheckpointWriter& writer, const ShardLayout& layout, int64_t rank, int64_t stage,
                const ShardedOptimizerState& state) {
  const auto buffers = state.buffers(true);
  const NamedBuffers master(buffers.begin(), buffers.begin() + 1), moments(buffers.begin() + 1, buffers.end());
  if (!is_whole_state(moments, layout.shard_numel())) {
    save_shards(writer, layout, rank, stage, buffers);
    return;
  }
  save_shards(writer, layout, rank, stage, master);
  save_whole_state(writer, rank, state_layout(layout.world_size(), layout.shard_numel(), layout.fragments(rank)),
                   moments);
}

std::unique_ptr<ShardedOptimizerState> make_optimizer_state(const StrategyOptions& options, int64_t rank,
                                                            int64_t shard_numel) {
  const auto& device = options.zero.offload_optimizer.device;
  if (device == "nvme") return std::make_unique<NvmeState>(options, rank, shard_numel);
  return std::make_unique<InMemoryState>(options.optimizer, shard_numel, device == "cpu");
}

}  // namespace xtrain::zero
