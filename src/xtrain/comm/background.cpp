// The communicator's two background threads: the Executor that runs composite operations (the
// reduce-scatter ring) in submission order, and the ArrivalRecorder that writes arrival records to
// the store without making collectives wait for it (declared in communicator_impl.h).
#include "xtrain/comm/communicator_impl.h"

namespace xtrain::comm {

// ---- Executor ----

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_future<void> Executor::submit(std::function<void()> task) {
  std::packaged_task<void()> t(std::move(task));
  auto f = t.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(t));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_one();
  return f;
}

void Executor::loop() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // exceptions go to the future
  }
}

// ---- ArrivalRecorder ----

ArrivalRecorder::~ArrivalRecorder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ArrivalRecorder::record(const compat::StorePtr& store, const std::string& key, const std::string& value) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_[{store.get(), key}] = {store, value};
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    wake = idle_;
  }
  if (wake) cv_.notify_one();
}

void ArrivalRecorder::loop() {
  for (;;) {
    decltype(pending_) batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      idle_ = true;
      cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
      idle_ = false;
      if (pending_.empty()) return;  // stop_ and nothing left to write
      batch.swap(pending_);
    }
    for (const auto& [where, what] : batch) {
      try {
        std::lock_guard<std::mutex> lock(store_mutex_);
        what.first->set(where.second, compat::bytes(what.second));
      } catch (const std::exception&) {
        // The store is gone (rank 0 exited): a failure elsewhere will say so.
      }
    }
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stop_; });  // the rate limit
  }
}

}  // namespace xtrain::comm
