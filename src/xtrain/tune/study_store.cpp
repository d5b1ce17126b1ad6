// study.json compatibility checks and trial records, each written atomically (base/file_io.h).
#include "xtrain/tune/study_store.h"

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"

namespace xtrain::tune {
namespace fs = std::filesystem;
namespace {

nlohmann::json settings_json(const StudySettings& s) {
  return {{"version", 1},
          {"space", nlohmann::json::parse(s.space.dump())},
          {"metric", s.metric},
          {"mode", s.mode},
          {"sampler", s.sampler},
          {"seed", s.seed},
          {"fixed_overrides", s.fixed_overrides}};
}

void check_same(const nlohmann::json& stored, const nlohmann::json& wanted, const std::string& dir) {
  for (const char* key : {"space", "metric", "mode", "sampler", "seed", "fixed_overrides"}) {
    // Compare as sorted JSON: the space's key order is not part of its meaning.
    const auto a = nlohmann::json::parse(stored.value(key, nlohmann::json()).dump());
    const auto b = nlohmann::json::parse(wanted.at(key).dump());
    XTRAIN_USAGE_CHECK(a == b, "tune: the study in ", dir, " was created with ", key, " = ", a.dump(),
                       ", but this run asks for ", b.dump(),
                       "; use the same settings to resume it, or a new --study directory");
  }
}

}  // namespace

StudyStore::StudyStore(std::string dir, const StudySettings& settings, const std::string& base_config_text)
    : dir_(std::move(dir)) {
  const auto study_json = (fs::path(dir_) / "study.json").string();
  const auto wanted = settings_json(settings);
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "trials", ec);
  XTRAIN_USAGE_CHECK(!ec, "tune: cannot create the study folder ", dir_, ": ", ec.message());
  if (!base_config_text.empty()) base_config_path_ = (fs::path(dir_) / "base_config.json").string();
  resumed_ = fs::exists(study_json);
  if (resumed_) {
    nlohmann::json stored;
    try {
      stored = nlohmann::json::parse(read_file(study_json));
    } catch (const nlohmann::json::exception& e) {
      XTRAIN_USAGE_ERROR("tune: ", study_json, " is not valid JSON: ", e.what());
    }
    check_same(stored, wanted, dir_);
    if (!base_config_path_.empty()) {
      XTRAIN_USAGE_CHECK(fs::exists(base_config_path_) && read_file(base_config_path_) == base_config_text,
                         "tune: --config differs from the base config this study started with (", base_config_path_,
                         "); use the same config to resume, or a new --study directory");
    }
    return;
  }
  if (!base_config_path_.empty()) write_file_atomic(base_config_path_, base_config_text);
  auto j = wanted;
  j["created"] = static_cast<int64_t>(std::time(nullptr));
  write_file_atomic(study_json, j.dump(2) + "\n");
}

std::string StudyStore::trial_record_path(int64_t id) const {
  return (fs::path(dir_) / "trials" / (trial_name(id) + ".json")).string();
}

std::string StudyStore::trial_run_dir(int64_t id) const {
  return (fs::path(dir_) / "trials" / trial_name(id)).string();
}

std::string StudyStore::base_config_path() const { return base_config_path_; }

std::vector<Trial> StudyStore::load_trials() const {
  std::vector<Trial> trials;
  for (const auto& entry : fs::directory_iterator(fs::path(dir_) / "trials")) {
    const auto& p = entry.path();
    if (!entry.is_regular_file() || p.extension() != ".json") continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(p.string()));
    } catch (const nlohmann::json::exception& e) {
      XTRAIN_USAGE_ERROR("tune: ", p.string(), " is not valid JSON: ", e.what());
    }
    trials.push_back(trial_from_json(j, p.string()));
  }
  std::sort(trials.begin(), trials.end(), [](const Trial& a, const Trial& b) { return a.id < b.id; });
  return trials;
}

void StudyStore::save(const Trial& trial) const {
  write_file_atomic(trial_record_path(trial.id), to_json(trial).dump(2) + "\n");
}

}  // namespace xtrain::tune
