// Communicator with several ranks over Gloo on loopback (each rank a process of this binary):
// every collective against its closed form (each rank's input is a known function of its rank),
// subgroups, and the single-process no-op path. Integer-valued floats make fp32/fp16/bf16 sums
// exact, so comparisons are exact unless stated.
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <functional>

#include "support/fixtures.h"
#include "support/multiprocess.h"
#include "xtrain/comm/communicator.h"

namespace xtrain::comm::communicator_test {
namespace {

using testing::expect_equal;

std::shared_ptr<Communicator> join() {
  CommOptions o;
  o.timeout_seconds = std::stod(testing::worker_env("XTRAIN_TEST_TIMEOUT", "30"));
  return Communicator::create(rank_info_from_env(), o);
}

// Rank r's input: r+1 + arange(n) (integers: sums are exact in every dtype used here).
at::Tensor input_of(int r, int64_t n, at::ScalarType dtype) {
  return (at::arange(n, at::kDouble) + (r + 1)).to(dtype);
}

at::Tensor sum_over_ranks(int world, int64_t n, at::ScalarType dtype) {
  at::Tensor s = at::zeros({n}, at::kDouble);
  for (int r = 0; r < world; ++r) s += input_of(r, n, at::kDouble);
  return s.to(dtype);
}

void check_all_reduce(Communicator& c) {
  const int W = c.size(), r = c.rank();
  for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kHalf, at::kBFloat16}) {
    at::Tensor t = input_of(r, 37, dtype);
    c.all_reduce(t);
    expect_equal(t, sum_over_ranks(W, 37, dtype), c10::str("all_reduce sum ", dtype));
  }
  at::Tensor avg = input_of(r, 5, at::kFloat);
  c.all_reduce(avg, ReduceOp::kAvg);
  // (sum of W integers) / W: one rounding of an exact sum, so within 1 ulp of the double result.
  testing::expect_close(avg, sum_over_ranks(W, 5, at::kDouble).div(W).to(at::kFloat), 1e-7, 0, "all_reduce avg");
  at::Tensor mx = input_of(r, 4, at::kFloat), mn = input_of(r, 4, at::kFloat);
  c.all_reduce(mx, ReduceOp::kMax);
  c.all_reduce(mn, ReduceOp::kMin);
  expect_equal(mx, input_of(W - 1, 4, at::kFloat), "all_reduce max");
  expect_equal(mn, input_of(0, 4, at::kFloat), "all_reduce min");
  EXPECT_THROW(c.all_reduce(at::zeros({2}, at::kLong), ReduceOp::kAvg), c10::Error);
  // bf16 goes round two rings (reduce-scatter, all-gather; padded to W slices): max/avg, and a
  // larger buffer whose sums bf16 holds exactly (values repeat with period 61), its W slices each
  // several ring pieces long and not a multiple of them, so that the all-gather ring passes pieces on
  // while the rest of their slice is on the way (the reduce-scatter ring's pieces are covered by
  // check_reduce_scatter too).
  at::Tensor bmx = input_of(r, 37, at::kBFloat16), bavg = input_of(r, 37, at::kBFloat16);
  c.all_reduce(bmx, ReduceOp::kMax);
  c.all_reduce(bavg, ReduceOp::kAvg);
  expect_equal(bmx, input_of(W - 1, 37, at::kBFloat16), "bf16 all_reduce max");
  testing::expect_close(bavg.to(at::kDouble), sum_over_ranks(W, 37, at::kDouble).div(W), 1.0 / 256, 0, "bf16 avg");
  const int64_t big = Communicator::kRingPieceElements + 3;
  at::Tensor periodic = at::arange(big, at::kLong).remainder(61);
  at::Tensor b = (periodic + r).to(at::kBFloat16);
  c.all_reduce(b);
  expect_equal(b, (periodic * W + W * (W - 1) / 2).to(at::kBFloat16), "bf16 all_reduce of 2^22 + 3 elements");
}

// CommStats: calls of each collective and the bytes this rank sends (bf16 all-reduce: half fp32's).
void check_counters(Communicator& c) {
  const int64_t W = c.size(), n = 64 * W;
  auto delta = [&c](const std::function<void()>& f) {
    const auto a = c.stats();
    f();
    const auto b = c.stats();
    return CommStats{b.collectives - a.collectives, b.p2p - a.p2p, b.bytes - a.bytes, b.all_reduces - a.all_reduces,
                     b.reduce_scatters - a.reduce_scatters, b.all_gathers - a.all_gathers, b.broadcasts - a.broadcasts,
                     b.sent_bytes - a.sent_bytes};
  };
  const auto f32 = delta([&] { c.all_reduce(at::ones({n}, at::kFloat)); });
  const auto b16 = delta([&] { c.all_reduce(at::ones({n}, at::kBFloat16)); });
  EXPECT_EQ(f32.all_reduces, 1);
  EXPECT_EQ(b16.all_reduces, 1);
  EXPECT_EQ(b16.reduce_scatters + b16.all_gathers, 0) << "a bf16 all-reduce counts once";
  EXPECT_EQ(f32.sent_bytes, 2 * (W - 1) * n * 4 / W) << "Gloo's ring: 2(W-1)/W of the buffer";
  // reduce-scatter: the own slice in bf16, then W-2 fp32 partial sums; all-gather: W-1 bf16 slices.
  EXPECT_EQ(b16.sent_bytes, 64 * (2 + (W - 2) * 4) + (W - 1) * 64 * 2);
  const auto rs = delta([&] { c.reduce_scatter(at::ones({n}, at::kFloat), at::empty({64}, at::kFloat)); });
  EXPECT_EQ(rs.reduce_scatters, 1);
  EXPECT_EQ(rs.sent_bytes, (W - 1) * 64 * 4);
  const auto ag = delta([&] { c.all_gather(at::ones({64}, at::kFloat), at::empty({n}, at::kFloat)); });
  EXPECT_EQ(ag.all_gathers, 1);
  EXPECT_EQ(ag.sent_bytes, (W - 1) * 64 * 4);
  const auto bc = delta([&] { c.broadcast(at::ones({n}, at::kFloat), 0); });
  EXPECT_EQ(bc.broadcasts, 1);
  EXPECT_EQ(bc.sent_bytes, (W - 1) * n * 4 / W);
  // all_gather into separate outputs: rank q's input lands in outputs[q], wherever that is.
  at::Tensor storage = at::zeros({2 * W * 5}, at::kFloat);
  std::vector<at::Tensor> outs;
  for (int64_t q = 0; q < W; ++q) outs.push_back(storage.narrow(0, (W - 1 - q) * 10 + 3, 5));  // reversed, gaps
  c.all_gather(input_of(c.rank(), 5, at::kFloat), outs);
  for (int q = 0; q < W; ++q) expect_equal(outs[q], input_of(q, 5, at::kFloat), c10::str("all_gather to outputs ", q));
}

void check_broadcast_and_gather(Communicator& c) {
  const int W = c.size(), r = c.rank();
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    at::Tensor t = input_of(r, 9, dtype);
    c.broadcast(t, W - 1);
    expect_equal(t, input_of(W - 1, 9, dtype), c10::str("broadcast ", dtype));
    at::Tensor out = at::zeros({W * 9}, dtype);
    c.all_gather(input_of(r, 9, dtype), out);
    for (int q = 0; q < W; ++q) expect_equal(out.narrow(0, q * 9, 9), input_of(q, 9, dtype), c10::str("gather ", q));
  }
}

void check_reduce_scatter(Communicator& c) {
  const int W = c.size(), r = c.rank();
  for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}) {
    const int64_t n = 6;
    at::Tensor in = input_of(r, W * n, dtype), out = at::zeros({n}, dtype);
    c.reduce_scatter(in, out);
    expect_equal(out, sum_over_ranks(W, W * n, dtype).narrow(0, r * n, n), c10::str("reduce_scatter ", dtype));
    expect_equal(in, input_of(r, W * n, dtype), "reduce_scatter leaves its input alone");
  }
  at::Tensor in = input_of(r, W * 3, at::kFloat), out = at::zeros({3}, at::kFloat);
  c.reduce_scatter(in, out, ReduceOp::kMax);
  expect_equal(out, input_of(W - 1, W * 3, at::kFloat).narrow(0, r * 3, 3), "reduce_scatter max");
  // Slices of two ring pieces (the second partial): each piece is reduced in its place, bf16 through
  // fp32 pieces. Values repeat with period 61 so that every sum is exact in bf16.
  const int64_t big = Communicator::kRingPieceElements + 5;
  auto periodic = [](int q, int64_t begin, int64_t n, at::ScalarType dtype) {
    return (at::arange(begin, begin + n, at::kLong).remainder(61) + (q + 1)).to(dtype);
  };
  at::Tensor expect_big = at::zeros({big}, at::kLong);  // this rank's slice of the sum
  for (int q = 0; q < W; ++q) expect_big += periodic(q, r * big, big, at::kLong);
  for (auto op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      if (op == ReduceOp::kAvg && dtype == at::kBFloat16) continue;
      at::Tensor big_out = at::zeros({big}, dtype);
      c.reduce_scatter(periodic(r, 0, W * big, dtype), big_out, op);
      const auto expect = op == ReduceOp::kAvg ? expect_big.to(at::kDouble).div(W) : expect_big.to(at::kDouble);
      testing::expect_close(big_out, expect.to(dtype), 1e-7, 0, c10::str("two-piece reduce_scatter ", dtype));
    }
  }
  // Several in flight at once, mixed with all-reduces: completion in any order, results exact.
  std::vector<Work> works;
  std::vector<at::Tensor> outs, sums;
  for (int i = 0; i < 4; ++i) {
    outs.push_back(at::zeros({5}, at::kFloat));
    works.push_back(c.reduce_scatter(input_of(r + i, W * 5, at::kFloat), outs.back(), ReduceOp::kSum, true));
    sums.push_back(input_of(r, 3, at::kFloat));
    works.push_back(c.all_reduce(sums.back(), ReduceOp::kSum, true));
  }
  for (auto& w : works) w.wait();
  for (int i = 0; i < 4; ++i) {
    at::Tensor expect = at::zeros({W * 5}, at::kDouble);
    for (int q = 0; q < W; ++q) expect += input_of(q + i, W * 5, at::kDouble);
    expect_equal(outs[i], expect.narrow(0, r * 5, 5).to(at::kFloat), c10::str("async reduce_scatter ", i));
    expect_equal(sums[i], sum_over_ranks(W, 3, at::kFloat), c10::str("async all_reduce ", i));
  }
}

void check_send_recv(Communicator& c) {
  const int W = c.size(), r = c.rank();
  at::Tensor got = at::zeros({4}, at::kBFloat16);
  Work s = c.send(input_of(r, 4, at::kBFloat16), (r + 1) % W, /*tag=*/7, true);
  c.recv(got, (r + W - 1) % W, 7);
  s.wait();
  expect_equal(got, input_of((r + W - 1) % W, 4, at::kBFloat16), "ring send/recv");
}

void check_groups(Communicator& c) {
  const int W = c.size(), r = c.rank();
  // Even and odd ranks; every rank creates both groups in the same order.
  std::vector<int> even, odd;
  for (int q = 0; q < W; ++q) (q % 2 ? odd : even).push_back(q);
  auto ge = c.new_group(even);
  auto go = c.new_group(odd);
  auto mine = r % 2 ? go : ge;
  ASSERT_TRUE(mine);
  EXPECT_FALSE(r % 2 ? ge : go);
  at::Tensor t = at::full({3}, static_cast<double>(r), at::kFloat);
  mine->all_reduce(t);
  double expect = 0;
  for (int q : (r % 2 ? odd : even)) expect += q;
  expect_equal(t, at::full({3}, expect, at::kFloat), "subgroup all_reduce");
  EXPECT_EQ(mine->global_ranks(), r % 2 ? odd : even);
  at::Tensor b = at::full({2}, static_cast<double>(r), at::kFloat);
  mine->broadcast(b, mine->size() - 1);
  expect_equal(b, at::full({2}, static_cast<double>(mine->global_ranks().back()), at::kFloat), "subgroup broadcast");
}

TEST(CommWorker, Collectives) {
  XTRAIN_WORKER_ONLY();
  auto c = join();
  ASSERT_EQ(c->size(), testing::worker_world_size());
  ASSERT_EQ(c->rank(), testing::worker_rank());
  check_all_reduce(*c);
  check_broadcast_and_gather(*c);
  check_reduce_scatter(*c);
  check_send_recv(*c);
  check_groups(*c);
  check_counters(*c);
  EXPECT_EQ(broadcast_string(*c, c->rank() == 1 ? "run-'x' \u00e9" : "ignored", 1), "run-'x' \u00e9");
  EXPECT_EQ(broadcast_string(*c, c->rank() == 0 ? "" : "not empty", 0), "");
  const auto before = c->stats();
  at::Tensor t = at::ones({10}, at::kFloat);
  c->all_reduce(t);
  EXPECT_EQ(c->stats().collectives, before.collectives + 1);
  EXPECT_EQ(c->stats().bytes, before.bytes + 40);
  c->barrier();
}

TEST(Communicator, CollectivesTwoRanks) {
  testing::expect_workers_ok("CommWorker.Collectives", 2);
}

TEST(Communicator, CollectivesFourRanks) {
  testing::expect_workers_ok("CommWorker.Collectives", 4);
}

TEST(Communicator, SingleProcessIsALocalNoOp) {
  auto c = Communicator::create(RankInfo{}, CommOptions{});
  EXPECT_EQ(c->size(), 1);
  EXPECT_FALSE(c->distributed());
  at::Tensor t = at::arange(5, at::kFloat), copy = t.clone();
  c->all_reduce(t, ReduceOp::kAvg);
  c->broadcast(t, 0);
  expect_equal(t, copy, "single all_reduce/broadcast");
  at::Tensor out = at::zeros({5}, at::kFloat);
  c->reduce_scatter(t, out);
  expect_equal(out, copy, "single reduce_scatter");
  out.zero_();
  c->all_gather(t, out);
  expect_equal(out, copy, "single all_gather");
  c->barrier();
  EXPECT_TRUE(c->all_reduce(t, ReduceOp::kSum, true).completed());
  EXPECT_EQ(c->stats().collectives, 0);
  auto g = c->new_group({0});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->size(), 1);
}

TEST(Communicator, DescribeArrivalsNamesMissingRanks) {
  const std::vector<int> ranks{0, 1, 2, 3};
  const auto m = describe_arrivals(17, {{17, "all_reduce"}, {16, "broadcast"}, {17, "all_reduce"}, {0, ""}}, ranks);
  EXPECT_EQ(m, "ranks 1, 3 did not arrive (rank 1 last started #16 broadcast; rank 3 last started no collective)");
  const auto all = describe_arrivals(3, {{3, "all_reduce"}, {3, "barrier"}}, {4, 6});
  EXPECT_EQ(all, "every rank arrived (at #3: rank 4 all_reduce, rank 6 barrier); a peer failed or the connection broke");
}

}  // namespace
}  // namespace xtrain::comm::communicator_test
