// Engine checkpoints: the strategy writes the model and optimizer state by parameter name (so a
// checkpoint survives a change of layout or world size); rank 0 adds the module's buffers
// (buffers.pt) and engine.json with the counters and scheduler / loss-scaler state.
#include <nlohmann/json.hpp>

#include <ATen/Functions.h>
#include <torch/nn/module.h>

#include <map>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/engine/engine.h"
#include "xtrain/sched/schedule.h"

namespace xtrain {

void Engine::save_checkpoint(checkpoint::CheckpointWriter& writer) const {
  strategy_->save(writer);
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
  strategy_->load(reader, load_optimizer);
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
