// BucketReducer with 2 and 4 ranks over Gloo: a toy model's gradients averaged across ranks equal
// the single-process gradient of the concatenated batch, with overlap on and off, with gradient
// accumulation (and no communication before the boundary), with an unused parameter, with buckets
// of one parameter each and one bucket for all, with DeepSpeed's pre/post scaling, and with an
// on_ready hook filling an fp32 reduce buffer from bf16 gradients. The reference is computed in
// each worker without any communication.
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <set>

#include "support/fixtures.h"
#include "support/multiprocess.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/data/bucket_reducer.h"

namespace xtrain::parallel::bucket_reducer_test {
namespace {

// Shapes of an unused vector, w1, b1, w2, b2; the flat buffer has 3 elements of tail padding. The
// unused parameter comes first in the layout, so it sits in the last bucket (see below).
const std::vector<std::vector<int64_t>> kShapes{{4}, {7, 5}, {7}, {3, 7}, {3}};

struct Model {
  at::Tensor flat, flat_grads;
  std::vector<at::Tensor> params;
  std::vector<ReducerParam> slots;
};

Model make_model(at::ScalarType dtype, double seed) {
  Model m;
  int64_t total = 0;
  for (const auto& s : kShapes) total += c10::multiply_integers(s);
  m.flat = (at::arange(total + 3, at::kDouble) * 0.37 + seed).sin().mul(0.5).to(dtype);
  m.flat_grads = at::zeros({total + 3}, dtype);
  int64_t off = 0;
  for (const auto& s : kShapes) {
    const int64_t n = c10::multiply_integers(s);
    at::Tensor p = m.flat.narrow(0, off, n).view(s).detach().requires_grad_(true);
    p.mutable_grad() = m.flat_grads.narrow(0, off, n).view(s);
    m.params.push_back(p);
    m.slots.push_back({p, off, n});
    off += n;
  }
  return m;
}

// Samples [first, first + count) of a fixed dataset.
std::pair<at::Tensor, at::Tensor> batch(int64_t first, int64_t count, at::ScalarType dtype) {
  at::Tensor i = at::arange(first, first + count, at::kDouble).unsqueeze(1);
  at::Tensor x = (i * at::arange(1, 6, at::kDouble) * 0.11).cos();
  at::Tensor y = (i * at::arange(1, 4, at::kDouble) * 0.07).sin();
  return {x.to(dtype), y.to(dtype)};
}

at::Tensor loss_of(const Model& m, int64_t first, int64_t count) {
  auto [x, y] = batch(first, count, m.flat.scalar_type());
  at::Tensor h = at::linear(x, m.params[1], m.params[2]).tanh();
  return (at::linear(h, m.params[3], m.params[4]) - y).pow(2).mean();  // params[0] is unused
}

// Single process: gradient of the mean loss over `count` samples, accumulated like the engine.
at::Tensor reference_grads(int64_t count, int64_t gas) {
  Model m = make_model(at::kFloat, 0.0);
  for (int64_t k = 0; k < gas; ++k) (loss_of(m, k * count / gas, count / gas) / gas).backward();
  return m.flat_grads;
}

struct Case {
  int64_t bucket_size;
  bool overlap;
  int64_t gas;
  bool prescale = false;
  double predivide = 1.0;
};

void run_case(const std::shared_ptr<comm::Communicator>& c, const Case& k) {
  const int W = c->size(), r = c->rank();
  const int64_t b = 3;  // micro-batch per rank
  Model m = make_model(at::kFloat, 0.0);
  ReducerOptions o;
  o.bucket_size = k.bucket_size;
  o.overlap = k.overlap;
  o.prescale_gradients = k.prescale;
  o.gradient_predivide_factor = k.predivide;
  BucketReducer reducer(c, m.slots, m.flat_grads, o);
  for (int step = 0; step < 2; ++step) {  // the second step checks the state was reset
    m.flat_grads.zero_();
    const auto before = c->stats().collectives;
    for (int64_t micro = 0; micro < k.gas; ++micro) {
      reducer.set_boundary(micro == k.gas - 1);
      // Global micro-batch `micro` is samples [micro*W*b, (micro+1)*W*b); rank r takes its r-th b.
      (loss_of(m, micro * W * b + r * b, b) / k.gas).backward();
      if (micro < k.gas - 1) {
        EXPECT_EQ(c->stats().collectives, before) << "communication before the boundary";
      }
    }
    reducer.finish();
    EXPECT_EQ(c->stats().collectives - before, static_cast<int64_t>(reducer.buckets().size()));
    // fp32: the same sums in a different order (per-rank means, then a mean of W): a few ulp.
    testing::expect_close(m.flat_grads, reference_grads(W * b * k.gas, k.gas), 1e-5, 1e-7,
                          c10::str("grads, bucket ", k.bucket_size, " overlap ", k.overlap, " gas ", k.gas));
  }
  const auto s = reducer.stats();
  // The bucket holding the unused parameter (the last one) waits for finish(); with one parameter
  // per bucket the others go out during backward.
  if (!k.overlap) {
    EXPECT_EQ(s.buckets_in_backward, 0);
  }
  if (k.overlap && k.bucket_size == 1) {
    EXPECT_EQ(s.buckets_in_backward, 2 * 4);  // two steps, four used parameters
    EXPECT_EQ(s.buckets_at_finish, 2 * 1);
  }
}

void run_bf16_on_ready(const std::shared_ptr<comm::Communicator>& c) {
  const int W = c->size(), r = c->rank();
  Model m = make_model(at::kBFloat16, 0.0);
  at::Tensor reduce = at::zeros(m.flat_grads.sizes(), at::kFloat);
  std::set<std::pair<int64_t, int64_t>> seen;
  ReducerOptions o;
  o.bucket_size = 20;
  BucketReducer reducer(c, m.slots, reduce, o, [&](int64_t begin, int64_t end) {
    EXPECT_TRUE(seen.insert({begin, end}).second) << "bucket prepared twice";
    reduce.narrow(0, begin, end - begin).copy_(m.flat_grads.narrow(0, begin, end - begin));
  });
  reducer.set_boundary(true);
  loss_of(m, r * 2, 2).backward();
  reducer.finish();
  EXPECT_EQ(seen.size(), reducer.buckets().size());
  // Expected: mean over ranks of each rank's bf16 gradient, each rank's computed here.
  at::Tensor expect = at::zeros(reduce.sizes(), at::kDouble);
  for (int q = 0; q < W; ++q) {
    Model local = make_model(at::kBFloat16, 0.0);
    loss_of(local, q * 2, 2).backward();
    expect += local.flat_grads.to(at::kDouble);
  }
  // fp32 sum of W bf16 values then one division: within fp32 rounding of the exact mean.
  testing::expect_close(reduce, expect.div(W).to(at::kFloat), 1e-6, 1e-9, "bf16 grads reduced in fp32");
}

void run_broadcast(const std::shared_ptr<comm::Communicator>& c) {
  Model mine = make_model(at::kFloat, 1.0 + c->rank());  // different on every rank
  std::vector<at::Tensor> ps = mine.params;
  broadcast_parameters(*c, ps, 0);
  Model root = make_model(at::kFloat, 1.0);
  const int64_t used = mine.flat.numel() - 3;  // the padding is not a parameter
  testing::expect_equal(mine.flat.narrow(0, 0, used), root.flat.narrow(0, 0, used), "parameters after broadcast");
}

TEST(ReducerWorker, MatchesSingleProcess) {
  XTRAIN_WORKER_ONLY();
  comm::CommOptions o;
  o.timeout_seconds = 30;
  auto c = comm::Communicator::create(comm::rank_info_from_env(), o);
  run_broadcast(c);
  for (const Case& k : {Case{500000000, true, 1}, Case{500000000, false, 1}, Case{1, true, 1}, Case{1, false, 1},
                        Case{20, true, 3}, Case{20, false, 2}, Case{1, true, 2, /*prescale=*/true},
                        Case{30, true, 1, false, /*predivide=*/2.0}}) {
    run_case(c, k);
  }
  run_bf16_on_ready(c);
  c->barrier();
}

TEST(BucketReducer, TwoRanksMatchSingleProcess) {
  testing::expect_workers_ok("ReducerWorker.MatchesSingleProcess", 2);
}

TEST(BucketReducer, FourRanksMatchSingleProcess) {
  testing::expect_workers_ok("ReducerWorker.MatchesSingleProcess", 4);
}

TEST(BucketReducer, SingleProcessLeavesGradientsAlone) {
  Model m = make_model(at::kFloat, 0.0);
  BucketReducer reducer(comm::Communicator::single(), m.slots, m.flat_grads, ReducerOptions{});
  reducer.set_boundary(true);
  loss_of(m, 0, 6).backward();
  reducer.finish();
  testing::expect_equal(m.flat_grads, reference_grads(6, 1), "world 1");
  EXPECT_EQ(reducer.stats().steps, 0);
}

TEST(BucketReducer, GradientThatIsNotAViewOfTheBufferIsAnError) {
  Model m = make_model(at::kFloat, 0.0);
  BucketReducer reducer(comm::Communicator::single(), m.slots, m.flat_grads, ReducerOptions{});
  m.params[4].mutable_grad() = at::zeros(kShapes[4], at::kFloat);  // detached from the buffer
  reducer.set_boundary(true);
  EXPECT_THROW(loss_of(m, 0, 6).backward(), c10::Error);
}

// The caller's collective (ZeRO's form): buckets launch in index order as their parameters' hooks
// fire (bucket b holds parameter 4-b, so the unused parameter 0 holds back only the last bucket),
// and with max_in_flight 1 each launch completes the one before it.
TEST(BucketReducer, CallersCollectiveLaunchesInOrderWithBoundedInFlight) {
  Model m = make_model(at::kFloat, 0.0);
  std::vector<std::string> events;
  std::vector<int> arrived;
  CollectiveOptions o;
  for (int b = 0; b < 5; ++b) o.buckets.push_back({m.slots[4 - b].offset, m.slots[4 - b].offset + m.slots[4 - b].numel, {4 - b}});
  o.max_in_flight = 1;
  o.on_grad = [&arrived](int i, bool again) {
    EXPECT_FALSE(again) << i;
    arrived.push_back(i);
    return true;
  };
  BucketReducer reducer(m.slots, o, [&events](int b) -> BucketDone {
    events.push_back(c10::str("L", b));
    return [&events, b] { events.push_back(c10::str("D", b)); };
  });
  for (int step = 0; step < 2; ++step) {  // the second step checks the state was reset
    events.clear();
    arrived.clear();
    reducer.set_boundary(true);
    loss_of(m, 0, 6).backward();
    EXPECT_EQ(events, (std::vector<std::string>{"L0", "L1", "D0", "L2", "D1", "L3", "D2"})) << "step " << step;
    reducer.finish();
    EXPECT_EQ(events, (std::vector<std::string>{"L0", "L1", "D0", "L2", "D1", "L3", "D2", "L4", "D3", "D4"}));
    EXPECT_EQ(std::set<int>(arrived.begin(), arrived.end()), (std::set<int>{1, 2, 3, 4})) << "parameter 0 is unused";
    EXPECT_EQ(arrived.size(), 4u);
  }
  EXPECT_EQ(reducer.stats().buckets_in_backward, 2 * 4);
  EXPECT_EQ(reducer.stats().buckets_at_finish, 2 * 1);
}

// Without parameters (stage 3) buckets go only when launched; complete(k) leaves the newest k.
TEST(BucketReducer, ExplicitLaunchesCompleteOldestFirst) {
  std::vector<std::string> events;
  BucketReducer reducer({}, CollectiveOptions{}, [&events](int b) -> BucketDone {
    events.push_back(c10::str("L", b));
    return [&events, b] { events.push_back(c10::str("D", b)); };
  });
  reducer.launch(3);
  reducer.launch(1);
  reducer.launch(2);
  reducer.complete(1);
  EXPECT_EQ(events, (std::vector<std::string>{"L3", "L1", "L2", "D3", "D1"}));
  reducer.complete();
  EXPECT_EQ(events.back(), "D2");
}

// A gradient the caller's on_grad declines (none arrived) does not count: its bucket waits for finish().
TEST(BucketReducer, DeclinedGradientHoldsItsBucketUntilFinish) {
  Model m = make_model(at::kFloat, 0.0);
  std::vector<std::string> events;
  CollectiveOptions o;
  o.buckets = {{0, m.flat_grads.numel(), {0, 1, 2, 3, 4}}};
  o.on_grad = [](int /*i*/, bool /*again*/) { return false; };
  BucketReducer reducer(m.slots, o, [&events](int b) -> BucketDone {
    events.push_back(c10::str("L", b));
    return nullptr;
  });
  reducer.set_boundary(true);
  loss_of(m, 0, 6).backward();
  EXPECT_TRUE(events.empty());
  reducer.finish();
  EXPECT_EQ(events, std::vector<std::string>{"L0"});
}

}  // namespace
}  // namespace xtrain::parallel::bucket_reducer_test
