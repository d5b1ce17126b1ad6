// Loader: one producer thread and a bounded queue under one mutex. The worker owns the sampler
// while it runs; set_state() stops it (joins: at most one collate is in flight), resets the sampler
// and starts it again, so no half-prepared batch from the old position can ever be returned.
#include "xtrain/data/loader.h"

#include <c10/util/Exception.h>

#include "xtrain/base/error.h"

namespace xtrain::data {

Loader::Loader(std::shared_ptr<Dataset> dataset, std::unique_ptr<Sampler> sampler, int64_t batch_size,
               int64_t prefetch)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), batch_size_(batch_size), prefetch_(prefetch) {
  TORCH_CHECK(dataset_ != nullptr && sampler_ != nullptr, "data: Loader needs a dataset and a sampler");
  XTRAIN_USAGE_CHECK(batch_size > 0, "data: the micro-batch size must be > 0, got ", batch_size,
                     " (train_micro_batch_size_per_gpu)");
  XTRAIN_USAGE_CHECK(prefetch >= 0, "data: xtrain.data.prefetch must be >= 0, got ", prefetch);
  consumer_state_ = sampler_->state();
  start();
}

Loader::~Loader() {
  try {
    stop();
  } catch (...) {
    // join() can only fail if the thread is not joinable, which stop() checks; never throw here.
  }
}

void Loader::start() {
  if (prefetch_ == 0) return;
  stopping_ = false;
  thread_ = std::thread(&Loader::worker, this);
}

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Loader::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || int64_t(ready_.size()) < prefetch_; });
    if (stopping_) return;
    try {
      std::vector<int64_t> indices = sampler_->next(batch_size_);
      const SamplerState after = sampler_->state();
      lock.unlock();
      Batch batch = dataset_->collate(indices);
      lock.lock();
      ready_.emplace_back(after, std::move(batch));
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      error_ = std::current_exception();
      cv_.notify_all();
      return;
    }
    cv_.notify_all();
  }
}

Batch Loader::next() {
  if (prefetch_ == 0) {
    const SamplerState before = sampler_->state();
    try {
      Batch batch = dataset_->collate(sampler_->next(batch_size_));
      std::lock_guard<std::mutex> lock(mu_);
      consumer_state_ = sampler_->state();
      return batch;
    } catch (...) {
      sampler_->set_state(before);  // a failed batch is not consumed
      throw;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || error_ != nullptr; });
  if (ready_.empty()) std::rethrow_exception(error_);
  auto item = std::move(ready_.front());
  ready_.pop_front();
  consumer_state_ = item.first;
  lock.unlock();
  cv_.notify_all();
  return std::move(item.second);
}

SamplerState Loader::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return consumer_state_;
}

void Loader::set_state(const SamplerState& state) {
  stop();  // the worker has exited: the fields below are ours alone
  ready_.clear();
  error_ = nullptr;
  try {
    sampler_->set_state(state);
  } catch (...) {
    sampler_->set_state(consumer_state_);  // keep the loader usable at its old position
    start();
    throw;
  }
  consumer_state_ = sampler_->state();
  start();
}

}  // namespace xtrain::data
