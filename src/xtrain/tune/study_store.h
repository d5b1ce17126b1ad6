// A study on disk: STUDY/study.json (search space, metric, mode, sampler, seed, fixed overrides),
// STUDY/base_config.json (the config every trial starts from), and one STUDY/trials/<id>.json per
// trial next to its run directory STUDY/trials/<id>/. Every file is written atomically (temporary
// file, fsync, rename, fsync of the folder), so a killed study never leaves a half-written record
// and a later run with the same settings resumes it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xtrain/tune/trial.h"

namespace xtrain::tune {

// What must match for a study to be resumed (a different space or metric would mix incomparable
// trials). The pruner and the number of trials may change between runs.
struct StudySettings {
  nlohmann::ordered_json space;
  std::string metric, mode, sampler;
  uint64_t seed = 0;
  std::vector<std::string> fixed_overrides;  // --set applied to every trial
};

class StudyStore {
 public:
  // Creates `dir` or opens the study in it; UsageError naming the setting when it differs.
  // base_config_text "" = trials get no --config (nothing stored).
  StudyStore(std::string dir, const StudySettings& settings, const std::string& base_config_text);

  const std::string& dir() const { return dir_; }
  bool resumed() const { return resumed_; }
  std::string trial_record_path(int64_t id) const;  // STUDY/trials/0007.json
  std::string trial_run_dir(int64_t id) const;      // STUDY/trials/0007
  std::string base_config_path() const;             // STUDY/base_config.json ("" when none)

  std::vector<Trial> load_trials() const;  // sorted by id
  void save(const Trial& trial) const;

 private:
  std::string dir_, base_config_path_;
  bool resumed_ = false;
};

}  // namespace xtrain::tune
