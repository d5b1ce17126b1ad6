// Loader: the same batches with and without prefetching, exact state/resume (also on a loader that
// has batches prefetched), errors from the worker reach the caller, and destruction never hangs.
#include <gtest/gtest.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/tensor.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/data/loader.h"

namespace xtrain::data::loader_test {
namespace {

// input = the indices, target = 2 × indices; optionally slow, optionally failing at one index.
class IndexDataset : public Dataset {
 public:
  explicit IndexDataset(int64_t n, int64_t fail_at = -1, int sleep_ms = 0)
      : n_(n), fail_at_(fail_at), sleep_ms_(sleep_ms) {}
  int64_t size() const override { return n_; }
  Batch collate(const std::vector<int64_t>& indices) const override {
    ++calls;
    if (sleep_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
    for (int64_t i : indices) TORCH_CHECK(i != fail_at_, "bad sample ", i);
    at::Tensor x = at::tensor(indices, at::kLong);
    return Batch{x, x * 2};
  }
  DatasetInfo info() const override { return {}; }
  mutable std::atomic<int> calls{0};

 private:
  int64_t n_, fail_at_;
  int sleep_ms_;
};

std::vector<std::vector<int64_t>> take(Loader& loader, int batches) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < batches; ++i) {
    const Batch b = loader.next();
    EXPECT_TRUE(b.target.equal(b.input * 2));
    out.emplace_back(b.input.data_ptr<int64_t>(), b.input.data_ptr<int64_t>() + b.input.numel());
  }
  return out;
}

TEST(Loader, PrefetchDoesNotChangeTheBatches) {
  auto ds = std::make_shared<IndexDataset>(23);
  Loader sync(ds, DistributedSampler(23, 9, 1, 2), 4, 0);
  const auto want = take(sync, 12);  // 11 samples per rank per epoch: crosses epochs
  for (int64_t prefetch : {1, 2, 5}) {
    Loader async(ds, DistributedSampler(23, 9, 1, 2), 4, prefetch);
    EXPECT_EQ(take(async, 12), want) << "prefetch " << prefetch;
  }
}

TEST(Loader, StateIsThePositionOfTheNextBatch) {
  auto ds = std::make_shared<IndexDataset>(30);
  for (int64_t prefetch : {0, 3}) {
    Loader a(ds, DistributedSampler(30, 4), 7, prefetch);
    take(a, 5);
    const SamplerState s = a.state();
    EXPECT_EQ(s.epoch, 1);  // 35 samples taken of 30 per epoch
    EXPECT_EQ(s.position, 5);
    Loader b(ds, DistributedSampler(30, 4), 7, prefetch);
    b.set_state(s);
    EXPECT_EQ(take(b, 6), take(a, 6)) << "prefetch " << prefetch;
  }
}

TEST(Loader, SetStateDropsPrefetchedBatches) {
  auto ds = std::make_shared<IndexDataset>(40);
  Loader loader(ds, DistributedSampler(40, 8), 5, 4);
  const SamplerState start = loader.state();
  const auto first = take(loader, 3);
  take(loader, 2);  // the worker is now ahead of the consumer
  loader.set_state(start);
  EXPECT_EQ(take(loader, 3), first);
}

TEST(Loader, WorkerErrorsReachTheCallerInOrder) {
  auto ds = std::make_shared<IndexDataset>(10, /*fail_at=*/7);
  Loader loader(ds, DistributedSampler(10, 0, 0, 1, /*shuffle=*/false), 2, 3);
  take(loader, 3);               // 0..5 are fine
  EXPECT_THROW(loader.next(), c10::Error);  // 6, 7
  EXPECT_EQ(loader.state().position, 6);    // the failed batch was not consumed
}

TEST(Loader, DestructorReturnsWhileTheWorkerIsBlocked) {
  auto ds = std::make_shared<IndexDataset>(100);
  {
    Loader loader(ds, DistributedSampler(100, 1), 4, 2);
    // Wait (bounded) until the queue is full and the worker waits for room.
    for (int i = 0; i < 2000 && ds->calls < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(ds->calls.load(), 2);
  }
  auto slow = std::make_shared<IndexDataset>(100, -1, /*sleep_ms=*/20);
  { Loader loader(slow, DistributedSampler(100, 1), 4, 2); }  // destroyed mid-collate
  SUCCEED();
}

TEST(Loader, BadArgumentsAreUsageErrors) {
  auto ds = std::make_shared<IndexDataset>(10);
  EXPECT_THROW(Loader(ds, DistributedSampler(10, 1), 0, 1), UsageError);
  EXPECT_THROW(Loader(ds, DistributedSampler(10, 1), 2, -1), UsageError);
}

}  // namespace
}  // namespace xtrain::data::loader_test
