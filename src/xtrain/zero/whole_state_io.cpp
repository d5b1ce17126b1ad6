// Whole-per-rank optimizer state in checkpoints (whole_state_io.h).
#include "xtrain/zero/whole_state_io.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"

namespace xtrain::zero {
namespace {

constexpr const char* kLayout = "layout";
constexpr const char* kKey = "optimizer.params.state_dtype";

std::string describe_layout(const at::Tensor& layout) {
  const auto* l = layout.data_ptr<int64_t>();
  return c10::str(l[0], " rank", l[0] == 1 ? "" : "s", ", ", l[1], " elements and ", (layout.numel() - 2) / 4,
                  " parameter fragments on this rank");
}

}  // namespace

std::string whole_state_file(int64_t rank) { return c10::str("optimizer_state_rank_", rank, ".pt"); }

bool is_whole_state(const NamedBuffers& state, int64_t numel) {
  for (const auto& [name, t] : state) {
    if (t.defined() && (t.scalar_type() != at::kFloat || t.numel() != numel)) return true;
  }
  return false;
}

at::Tensor state_layout(int64_t world_size, int64_t numel, const std::vector<Fragment>& fragments) {
  auto out = at::empty({2 + 4 * static_cast<int64_t>(fragments.size())}, at::kLong);
  auto* p = out.data_ptr<int64_t>();
  *p++ = world_size;
  *p++ = numel;
  for (const auto& f : fragments) {
    *p++ = f.slot;
    *p++ = f.start;
    *p++ = f.numel;
    *p++ = f.local;
  }
  return out;
}

void save_whole_state(checkpoint::CheckpointWriter& writer, int64_t rank, const at::Tensor& layout,
                      const NamedBuffers& state) {
  checkpoint::NamedTensors out{{kLayout, layout}};
  for (const auto& [name, t] : state) out.emplace_back(name, t.contiguous());
  writer.write_tensors(whole_state_file(rank), out);
}

void load_whole_state(const checkpoint::CheckpointReader& reader, int64_t rank, const at::Tensor& layout,
                      const NamedBuffers& state) {
  const auto file = whole_state_file(rank);
  XTRAIN_USAGE_CHECK(reader.has_file(file), "checkpoint: ", reader.dir(), " has no ", file,
                     ": its optimizer state is fp32 (or was written by fewer ranks), and this run keeps 8-bit state (",
                     kKey, " \"int8\"). Resume it with ", kKey,
                     " \"fp32\", or start with fresh optimizer state from its weights (xtrain.model.init_from)");
  std::map<std::string, at::Tensor> saved;
  for (auto& [name, t] : reader.read_tensors(file)) saved[name] = t;
  const auto it = saved.find(kLayout);
  TORCH_CHECK(it != saved.end(), "checkpoint: ", reader.dir(), "/", file, " has no layout tensor");
  XTRAIN_USAGE_CHECK(it->second.sizes() == layout.sizes() && at::equal(it->second, layout), "checkpoint: ",
                     reader.dir(), " holds 8-bit optimizer state (", kKey, " \"int8\") partitioned for ",
                     describe_layout(it->second), "; this run partitions it for ", describe_layout(layout),
                     ". Resharding 8-bit state is not supported yet: resume with the same data-parallel size and "
                     "zero_optimization (stage, bucket sizes), or start with fresh optimizer state from its weights "
                     "(xtrain.model.init_from)");
  for (const auto& [name, t] : state) {
    const auto s = saved.find(name);
    XTRAIN_USAGE_CHECK(s != saved.end() && s->second.scalar_type() == t.scalar_type() &&
                           s->second.numel() == t.numel(),
                       "checkpoint: ", reader.dir(), "/", file, " has no ", t.scalar_type(), " tensor '", name, "' of ",
                       t.numel(), " elements (was it written by another optimizer?)");
    t.copy_(s->second.reshape(t.sizes()));
  }
}

void refuse_whole_state_checkpoint(const checkpoint::CheckpointReader& reader) {
  XTRAIN_USAGE_CHECK(!reader.has_file(whole_state_file(0)), "checkpoint: ", reader.dir(),
                     " holds 8-bit optimizer state; this run keeps fp32 state. Resume it with ", kKey,
                     " \"int8\", or start with fresh optimizer state from its weights (xtrain.model.init_from)");
}

}  // namespace xtrain::zero
