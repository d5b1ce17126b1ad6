#include "xtrain/run/run_dir.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/Functions.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <filesystem>

#include "xtrain/base/error.h"

namespace xtrain {
namespace fs = std::filesystem;

std::string new_run_dir_name(const std::string& output, const std::string& name, const std::string& model_type) {
  if (!name.empty()) return (fs::path(output) / name).string();
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  std::string dir = (fs::path(output) / (model_type + "-" + stamp)).string();
  for (int i = 2; fs::exists(dir); ++i) dir = (fs::path(output) / (model_type + "-" + stamp + "-" + std::to_string(i))).string();
  return dir;
}

std::string latest_run_dir(const std::string& output) {
  std::string best;
  fs::file_time_type best_time{};
  std::error_code ec;
  if (!fs::is_directory(output, ec)) return "";
  for (const auto& entry : fs::directory_iterator(output, ec)) {
    const auto latest = entry.path() / "checkpoints" / "latest";
    if (!fs::exists(latest, ec)) continue;
    const auto t = fs::last_write_time(latest, ec);
    if (best.empty() || t > best_time) {
      best = entry.path().string();
      best_time = t;
    }
  }
  return best;
}

std::string trainer_state_json(const data::SamplerState& sampler) {
  auto gen = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  const auto* bytes = state.data_ptr<uint8_t>();
  for (int64_t i = 0; i < state.numel(); ++i) {
    hex += kHex[bytes[i] >> 4];
    hex += kHex[bytes[i] & 15];
  }
  nlohmann::json j = {{"sampler", {{"epoch", sampler.epoch}, {"position", sampler.position}}}, {"rng", hex}};
  return j.dump(2);
}

data::SamplerState restore_trainer_state(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  const std::string hex = j.at("rng").get<std::string>();
  auto state = at::empty({static_cast<int64_t>(hex.size() / 2)}, at::kByte);
  auto* bytes = state.data_ptr<uint8_t>();
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes[i / 2] = static_cast<uint8_t>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
  auto gen = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }
  data::SamplerState s;
  s.epoch = j.at("sampler").at("epoch").get<int64_t>();
  s.position = j.at("sampler").at("position").get<int64_t>();
  return s;
}

}  // namespace xtrain
