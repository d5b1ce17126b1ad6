// Engine checkpoints: the strategy writes the model and optimizer state by parameter name (so a
// checkpoint survives a change of layout or world size); rank 0 adds the module's buffers
// (buffers.pt) and engine.json with the counters and scheduler / loss-scaler state. Before any file
// is written, checkpoint.tag_validation compares every rank's tag (DeepSpeed's
// _checkpoint_tag_validation, which all-reduces a SHA-1 of the tag): here the tags themselves are
// gathered, so a mismatch names each rank's tag.
#include <nlohmann/json.hpp>

#include <ATen/Functions.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <map>
#include <set>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/engine/engine.h"
#include "xtrain/sched/schedule.h"

namespace xtrain {
namespace {

// Every rank's string, in group rank order: lengths first, then the bytes padded to the longest.
std::vector<std::string> all_gather_strings(comm::Communicator& group, const std::string& value) {
  if (!group.distributed()) return {value};
  const int n = group.size();
  at::Tensor lengths = at::empty({n}, at::kLong);
  group.all_gather(at::full({1}, static_cast<int64_t>(value.size()), at::kLong), lengths);
  const int64_t longest = std::max<int64_t>(1, lengths.max().item<int64_t>());
  at::Tensor mine = at::zeros({longest}, at::kByte), all = at::empty({n * longest}, at::kByte);
  std::copy(value.begin(), value.end(), mine.data_ptr<uint8_t>());
  group.all_gather(mine, all);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    const auto* bytes = reinterpret_cast<const char*>(all.data_ptr<uint8_t>()) + r * longest;
    out.emplace_back(bytes, static_cast<size_t>(lengths[r].item<int64_t>()));
  }
  return out;
}

// World rank -> tag for every rank of the grid: gathered over the data-parallel group, then those
// lists over the model-parallel group (one rank of each data-parallel group in it, so the union is
// every rank).
std::map<int, std::string> tags_of_every_rank(comm::Communicator& dp, comm::Communicator* mp, const std::string& tag) {
  nlohmann::json level = nlohmann::json::object();
  const auto dp_tags = all_gather_strings(dp, tag);
  for (size_t r = 0; r < dp_tags.size(); ++r) level[std::to_string(dp.global_ranks()[r])] = dp_tags[r];
  // A tag need not be UTF-8: invalid bytes become U+FFFD in the message rather than an exception.
  const std::string mine = level.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::map<int, std::string> out;
  for (const auto& text : mp ? all_gather_strings(*mp, mine) : std::vector<std::string>{mine}) {
    const auto parsed = nlohmann::json::parse(text);  // items() does not keep a temporary alive
    for (const auto& item : parsed.items()) out[std::stoi(item.key())] = item.value().get<std::string>();
  }
  return out;
}

// "'a' on ranks 0, 2; 'b' on rank 1".
std::string describe_tags(const std::map<int, std::string>& tags) {
  std::map<std::string, std::vector<int>> ranks_of;
  for (const auto& [rank, tag] : tags) ranks_of[tag].push_back(rank);
  std::string out;
  for (const auto& [tag, ranks] : ranks_of) {
    out += (out.empty() ? "'" : "; '") + tag + (ranks.size() == 1 ? "' on rank " : "' on ranks ");
    for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

// checkpoint.tag_validation: collective over every rank that saves (Ignore: none). All ranks reach
// the same verdict, so under Fail every rank throws before writing and the last checkpoint and
// `latest` stay as they were.
void Engine::validate_checkpoint_tag(const std::string& tag) const {
  const std::string& mode = config_.checkpoint.tag_validation;
  if (mode == "Ignore" || (!dp_->distributed() && !(mp_.group && mp_.group->distributed()))) return;
  const auto tags = tags_of_every_rank(*dp_, mp_.group.get(), tag);
  std::set<std::string> distinct;
  for (const auto& [rank, t] : tags) distinct.insert(t);
  if (distinct.size() <= 1) return;
  const std::string what = c10::str("checkpoint: the ranks save different tags (", describe_tags(tags),
                                    "); a tag that differs by rank cannot be loaded back with another world size: "
                                    "give every rank the same tag");
  XTRAIN_USAGE_CHECK(mode != "Fail", what, " (checkpoint.tag_validation is \"Fail\"; nothing was written)");
  log::warn(what, " (checkpoint.tag_validation is \"Warn\")");
}

void Engine::save_checkpoint(checkpoint::CheckpointWriter& writer) const {
  validate_checkpoint_tag(writer.tag());
  if (local_sgd_) {
    save_local_sgd(writer);
  } else {
    strategy_->save(writer);
  }
  if (dp_->rank() != 0) return;
  if (module_) {  // buffers (BatchNorm running statistics) travel with the weights
    checkpoint::NamedTensors buffers;
    for (const auto& b : module_->named_buffers(true)) buffers.emplace_back(b.key(), b.value().clone());
    if (!buffers.empty()) writer.write_tensors("buffers.pt", buffers);
  }
  nlohmann::json j = {
      {"global_steps", global_steps_},     {"applied_steps", applied_steps_},
      {"skipped_steps", skipped_steps_},   {"global_samples", global_samples_},
      {"micro_steps", micro_steps_},       {"optimizer", strategy_->optimizer_name()},
      {"optimizer_step_count", strategy_->optimizer_step_count()},
      {"scheduler_state", schedule_->state_json()},
      {"dp_world_size", config_.dp_world_size},
      {"zero_stage", config_.zero_optimization.stage},
      {"loss_scaler", scaler_.state_json()},
      {"precision", policy_.describe()},
  };
  writer.write_text("engine.json", j.dump(2));
}

void Engine::load_checkpoint(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  at::NoGradGuard no_grad;
  if (local_sgd_) {
    load_local_sgd(reader, load_optimizer);
  } else {
    strategy_->load(reader, load_optimizer);
  }
  if (module_ && reader.has_file("buffers.pt")) {
    std::map<std::string, at::Tensor> saved;
    for (auto& [k, v] : reader.read_tensors("buffers.pt")) saved[k] = v;
    for (const auto& b : module_->named_buffers(true)) {
      auto it = saved.find(b.key());
      XTRAIN_USAGE_CHECK(it != saved.end(), "checkpoint: buffers.pt has no tensor '", b.key(), "'");
      b.value().copy_(it->second);
    }
  }
  if (!load_optimizer) return;
  const auto j = nlohmann::json::parse(reader.read_text("engine.json"));
  XTRAIN_USAGE_CHECK(j.at("optimizer").get<std::string>() == strategy_->optimizer_name(),
                     "checkpoint: written with optimizer ", j.at("optimizer").get<std::string>(), ", the config has ",
                     strategy_->optimizer_name());
  global_steps_ = j.at("global_steps").get<int64_t>();
  applied_steps_ = j.at("applied_steps").get<int64_t>();
  skipped_steps_ = j.at("skipped_steps").get<int64_t>();
  global_samples_ = j.at("global_samples").get<int64_t>();
  micro_steps_ = j.at("micro_steps").get<int64_t>();
  strategy_->set_optimizer_step_count(j.at("optimizer_step_count").get<int64_t>());
  schedule_->load_state_json(j.at("scheduler_state").get<std::string>());
  if (j.contains("loss_scaler")) scaler_.load_state_json(j.at("loss_scaler").get<std::string>());
  loss_sum_ = 0.0;
  loss_count_ = 0;
}

}  // namespace xtrain
