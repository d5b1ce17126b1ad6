// Everything one run needs, built from its config in a fixed order (the order of random draws is
// part of the result: data, then the model from the seed, then the engine): the process groups,
// the datasets, the task, the model (whole, tensor-parallel, or this rank's pipeline stage), the
// loss, the Engine and the training loader. Internal to run/.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "xtrain/comm/rank_info.h"
#include "xtrain/config/config.h"
#include "xtrain/data/curriculum.h"
#include "xtrain/data/dataset.h"
#include "xtrain/data/loader.h"
#include "xtrain/engine/engine.h"
#include "xtrain/models/factory.h"
#include "xtrain/parallel/process_groups.h"
#include "xtrain/parallel/tensor/shard_spec.h"
#include "xtrain/run/task.h"

namespace xtrain {

struct Setup {
  config::Config config;
  data::Splits data;
  const Task* task = nullptr;
  models::Model model;
  std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> loss;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<data::Loader> train_loader;
  std::optional<data::CurriculumScheduler> curriculum;  // curriculum_learning.enabled: seqlen per step
  comm::RankInfo rank;                       // who this process is (single process: rank 0 of 1)
  std::shared_ptr<comm::Communicator> comm;  // every rank (barriers)
  parallel::ParallelGroups groups;           // the data-, tensor- and pipeline-parallel groups
  // How each parameter of the whole (tensor-parallel) model is split, for the checkpoint manifest.
  std::map<std::string, parallel::tensor::ShardSpec> shard_specs;
  bool lead() const { return rank.rank == 0; }
};

// `group`: every rank (nullptr: a single process). `run_dir` caches difficulty scores.
Setup build(const config::Config& cfg, const comm::RankInfo& rank = {}, std::shared_ptr<comm::Communicator> group = nullptr,
            const std::string& run_dir = "");

// Difficulty-ordered (xtrain.data.ordering, scores cached in the run directory) or each rank's
// deterministic shard of every epoch's permutation (train_sampler.cpp).
std::unique_ptr<data::Sampler> make_train_sampler(const Setup& s, const std::string& run_dir);

}  // namespace xtrain
