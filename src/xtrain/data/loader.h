// Batches from a Dataset in the sampler's order, optionally prepared `prefetch` batches ahead on a
// background thread. The loader's state is the sampler's state at the next batch to be returned,
// so a checkpoint taken between steps resumes exactly.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "xtrain/data/dataset.h"
#include "xtrain/data/sampler.h"

namespace xtrain::data {

class Loader {
 public:
  Loader(std::shared_ptr<Dataset> dataset, std::unique_ptr<Sampler> sampler, int64_t batch_size, int64_t prefetch);
  Loader(std::shared_ptr<Dataset> dataset, DistributedSampler sampler, int64_t batch_size, int64_t prefetch)
      : Loader(std::move(dataset), std::make_unique<DistributedSampler>(std::move(sampler)), batch_size, prefetch) {}
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  Batch next();
  SamplerState state() const;           // position of the next batch next() returns
  void set_state(const SamplerState& state);  // drops prefetched batches
  const Dataset& dataset() const { return *dataset_; }

 private:
  void start();
  void stop();
  void worker();
  std::shared_ptr<Dataset> dataset_;
  std::unique_ptr<Sampler> sampler_;
  int64_t batch_size_, prefetch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<SamplerState, Batch>> ready_;  // each batch, with the sampler state after it
  std::exception_ptr error_;  // the worker's failure, rethrown by next() once ready_ is drained
  SamplerState consumer_state_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace xtrain::data
