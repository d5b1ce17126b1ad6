#include "xtrain/zero/shard_io.h"

#include <nlohmann/json.hpp>

#include <ATen/Functions.h>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"

namespace xtrain::zero {

void save_shards(checkpoint::CheckpointWriter& writer, const ShardLayout& layout, int64_t rank, int64_t stage,
                 const NamedBuffers& buffers) {
  checkpoint::NamedTensors out;
  const auto frags = layout.fragments(rank);
  for (const auto& [prefix, buf] : buffers) {
    for (const auto& f : frags) {
      out.emplace_back(c10::str(prefix, "/", layout.flat.slots[f.slot].name, "@", f.start),
                       buf.narrow(0, f.local, f.numel).to(at::kFloat).clone());
    }
  }
  writer.write_tensors(c10::str("zero_rank_", rank, ".pt"), out);
  if (rank != 0) return;
  nlohmann::json params = nlohmann::json::array();
  for (const auto& s : layout.flat.slots) params.push_back({{"name", s.name}, {"shape", s.shape}});
  nlohmann::json j = {{"stage", stage}, {"world_size", layout.world_size()}, {"params", params}};
  writer.write_text("zero.json", j.dump(1));
}

Consolidated consolidate(const checkpoint::CheckpointReader& reader, bool with_optimizer) {
  Consolidated out;
  if (!reader.has_file("zero.json")) {  // stage 0: already whole
    for (auto& [k, v] : reader.read_tensors("model.pt")) out.model.emplace_back(k, v.to(at::kFloat));
    if (with_optimizer && reader.has_file("optimizer.pt")) {
      for (auto& [k, v] : reader.read_tensors("optimizer.pt")) out.optimizer.emplace_back(k, v.to(at::kFloat));
    }
    return out;
  }
  const auto j = nlohmann::json::parse(reader.read_text("zero.json"));
  const int64_t world = j.at("world_size").get<int64_t>();
  std::map<std::string, at::Tensor> full;  // "<prefix>/<param>" -> flat fp32
  std::map<std::string, int64_t> filled;
  for (int64_t r = 0; r < world; ++r) {
    const auto file = c10::str("zero_rank_", r, ".pt");
    XTRAIN_USAGE_CHECK(reader.has_file(file), "checkpoint: ", reader.dir(), " was written by ", world,
                       " ranks but has no ", file);
    for (auto& [key, frag] : reader.read_tensors(file)) {
      const auto at_pos = key.rfind('@');
      const auto slash = key.find('/');
      TORCH_CHECK(at_pos != std::string::npos && slash != std::string::npos, "checkpoint: bad fragment name ", key);
      const std::string prefix = key.substr(0, slash), name = key.substr(0, at_pos);
      if (!with_optimizer && prefix != "master") continue;
      auto& t = full[name];
      if (!t.defined()) t = at::zeros({0}, at::kFloat);
      const int64_t start = std::stoll(key.substr(at_pos + 1)), n = frag.numel();
      if (t.numel() < start + n) {  // grow: sizes come from zero.json below, fragments may arrive in any order
        auto bigger = at::zeros({start + n}, at::kFloat);
        bigger.narrow(0, 0, t.numel()).copy_(t);
        t = bigger;
      }
      t.narrow(0, start, n).copy_(frag.reshape({-1}));
      filled[name] += n;
    }
  }
  std::vector<std::string> prefixes{"master"};
  for (const auto& [name, t] : full) {
    const auto p = name.substr(0, name.find('/'));
    if (p != "master" && std::find(prefixes.begin(), prefixes.end(), p) == prefixes.end()) prefixes.push_back(p);
  }
  for (const auto& p : j.at("params")) {
    const auto pname = p.at("name").get<std::string>();
    const auto shape = p.at("shape").get<std::vector<int64_t>>();
    const int64_t numel = c10::multiply_integers(shape);
    for (const auto& prefix : prefixes) {
      const auto key = prefix + "/" + pname;
      auto it = full.find(key);
      XTRAIN_USAGE_CHECK(it != full.end() && filled[key] == numel && it->second.numel() == numel, "checkpoint: ",
                         reader.dir(), ": the shards hold ", filled[key], " of ", numel, " elements of ", key);
      auto t = it->second.view(shape);
      if (prefix == "master") {
        out.model.emplace_back(pname, t);
      } else {
        out.optimizer.emplace_back(key, t);
      }
    }
  }
  return out;
}

void copy_checkpoint_file(const checkpoint::CheckpointReader& reader, checkpoint::CheckpointWriter& writer,
                          const std::string& file) {
  const bool tensors = file.size() > 3 && file.compare(file.size() - 3, 3, ".pt") == 0;
  if (tensors) {
    writer.write_tensors(file, reader.read_tensors(file));
  } else {
    writer.write_text(file, reader.read_text(file));
  }
}

std::string write_consolidated(const checkpoint::CheckpointReader& reader, const std::string& out_root) {
  const auto full = consolidate(reader, /*with_optimizer=*/true);
  checkpoint::CheckpointWriter writer(out_root, reader.tag(), 0);
  writer.write_tensors("model.pt", full.model);
  if (!full.optimizer.empty()) writer.write_tensors("optimizer.pt", full.optimizer);
  for (const auto& file : reader.files()) {
    if (file == "model.pt" || file == "optimizer.pt" || file == "zero.json" || file.rfind("zero_rank_", 0) == 0) continue;
    copy_checkpoint_file(reader, writer, file);
  }
  writer.finish_rank();
  writer.commit();
  return out_root + "/" + reader.tag();
}

void load_shards(const Consolidated& full, const ShardLayout& layout, int64_t rank, const NamedBuffers& buffers) {
  std::map<std::string, at::Tensor> by_key;
  for (const auto& [k, v] : full.model) by_key["master/" + k] = v;
  for (const auto& [k, v] : full.optimizer) by_key[k] = v;
  at::NoGradGuard no_grad;
  const auto frags = layout.fragments(rank);
  for (const auto& [prefix, buf] : buffers) {
    for (const auto& f : frags) {
      const auto& slot = layout.flat.slots[f.slot];
      auto it = by_key.find(prefix + "/" + slot.name);
      XTRAIN_USAGE_CHECK(it != by_key.end(), "checkpoint: no tensor for '", prefix == "master" ? "" : prefix + "/",
                         slot.name, "' (was it written by a different model?)");
      XTRAIN_USAGE_CHECK(it->second.numel() == slot.numel, "checkpoint: '", slot.name, "' has ", it->second.numel(),
                         " elements, the model has ", slot.numel);
      buf.narrow(0, f.local, f.numel).copy_(it->second.reshape({-1}).narrow(0, f.start, f.numel));
    }
  }
}

void round_master(const NamedBuffers& buffers, at::ScalarType param_dtype) {
  if (param_dtype == at::kFloat) return;
  at::NoGradGuard no_grad;
  for (const auto& [name, buf] : buffers) {
    if (name == "master") buf.copy_(buf.to(param_dtype));
  }
}

}  // namespace xtrain::zero
