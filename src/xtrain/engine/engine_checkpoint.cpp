// Engine checkpoints: state by parameter name, never by flat offset, so a checkpoint survives a
// change of layout (and, later, of world size). model.pt holds the fp32 parameters, optimizer.pt
// "<state>/<param>" tensors, engine.json the counters and scheduler/optimizer scalars.
#include <nlohmann/json.hpp>

#include <ATen/Functions.h>

#include <map>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/engine/engine.h"
#include "xtrain/optim/optimizer.h"
#include "xtrain/sched/schedule.h"

namespace xtrain {

namespace {
std::map<std::string, at::Tensor> by_name(const checkpoint::NamedTensors& tensors) {
  return {tensors.begin(), tensors.end()};
}

void copy_checked(const std::map<std::string, at::Tensor>& from, const std::string& key, const at::Tensor& to,
                  const std::string& file) {
  auto it = from.find(key);
  XTRAIN_USAGE_CHECK(it != from.end(), "checkpoint: ", file, " has no tensor '", key,
                     "' (was it written by a different model?)");
  XTRAIN_USAGE_CHECK(it->second.numel() == to.numel(), "checkpoint: ", file, ": '", key, "' has shape ",
                     it->second.sizes(), ", the model has ", to.sizes());
  to.copy_(it->second.reshape(to.sizes()));
}
}  // namespace

void Engine::save_checkpoint(checkpoint::CheckpointWriter& writer) const {
  checkpoint::NamedTensors model, optim_state;
  for (const auto& slot : layout_.slots) {
    // The fp32 master: the exact state; low-precision parameters are its rounding.
    model.emplace_back(slot.name, flat_master_.narrow(0, slot.offset, slot.numel).view(slot.shape).clone());
  }
  if (module_) {  // buffers (BatchNorm running statistics) travel with the weights
    for (const auto& b : module_->named_buffers(true)) model.emplace_back(b.key(), b.value().clone());
  }
  for (const auto& [state_name, flat] : optimizer_->state()) {
    for (const auto& slot : layout_.slots) {
      optim_state.emplace_back(state_name + "/" + slot.name,
                               flat.narrow(0, slot.offset, slot.numel).view(slot.shape).clone());
    }
  }
  writer.write_tensors("model.pt", model);
  writer.write_tensors("optimizer.pt", optim_state);
  nlohmann::json j = {
      {"global_steps", global_steps_},     {"applied_steps", applied_steps_},
      {"skipped_steps", skipped_steps_},   {"global_samples", global_samples_},
      {"micro_steps", micro_steps_},       {"optimizer", optimizer_->name()},
      {"optimizer_step_count", optimizer_->step_count()},
      {"scheduler_state", schedule_->state_json()},
      {"dp_world_size", config_.dp_world_size},
      {"loss_scaler", scaler_.state_json()},
      {"precision", policy_.describe()},
  };
  writer.write_text("engine.json", j.dump(2));
}

void Engine::load_checkpoint(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  at::NoGradGuard no_grad;
  const auto model = by_name(reader.read_tensors("model.pt"));
  for (const auto& slot : layout_.slots) {
    copy_checked(model, slot.name, flat_master_.narrow(0, slot.offset, slot.numel), "model.pt");
  }
  if (policy_.mixed()) flat_params_.copy_(flat_master_);
  if (module_) {
    for (const auto& b : module_->named_buffers(true)) copy_checked(model, b.key(), b.value(), "model.pt");
  }
  if (!load_optimizer) return;
  const auto state = by_name(reader.read_tensors("optimizer.pt"));
  for (const auto& [state_name, flat] : optimizer_->state()) {
    for (const auto& slot : layout_.slots) {
      copy_checked(state, state_name + "/" + slot.name, flat.narrow(0, slot.offset, slot.numel), "optimizer.pt");
    }
  }
  const auto j = nlohmann::json::parse(reader.read_text("engine.json"));
  XTRAIN_USAGE_CHECK(j.at("optimizer").get<std::string>() == optimizer_->name(), "checkpoint: written with optimizer ",
                     j.at("optimizer").get<std::string>(), ", the config has ", optimizer_->name());
  global_steps_ = j.at("global_steps").get<int64_t>();
  applied_steps_ = j.at("applied_steps").get<int64_t>();
  skipped_steps_ = j.at("skipped_steps").get<int64_t>();
  global_samples_ = j.at("global_samples").get<int64_t>();
  micro_steps_ = j.at("micro_steps").get<int64_t>();
  optimizer_->set_step_count(j.at("optimizer_step_count").get<int64_t>());
  schedule_->load_state_json(j.at("scheduler_state").get<std::string>());
  if (j.contains("loss_scaler")) scaler_.load_state_json(j.at("loss_scaler").get<std::string>());
  zero_grads();
  loss_sum_ = 0.0;
  loss_count_ = 0;
}

}  // namespace xtrain
