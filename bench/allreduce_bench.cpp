// Gradient all-reduce bandwidth, 2 ranks on this machine: xtrain's BucketReducer (buckets of a flat
// fp32 gradient buffer, arrival records, averaging) against one raw c10d ProcessGroupGloo allreduce
// of the same bytes; the per-collective cost of the arrival record (1-element all-reduces); the
// ring reduce-scatter against an all-reduce of the same buffer; and the
// share of communication hidden behind backward by overlap_comm on an MLP.
// Run: build/bench/bench_allreduce_bench   (re-launches itself as 2 ranks with xtrain's launcher)
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "launch_self.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/data/bucket_reducer.h"

namespace {

using Clock = std::chrono::steady_clock;
using xtrain::comm::Communicator;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

c10::intrusive_ptr<c10d::ProcessGroupGloo> raw_group(int rank, int world, int port) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(port);
  o.isServer = rank == 0;
  o.waitWorkers = false;
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
  auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(60));
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
}

// A flat fp32 buffer of `n` elements seen as parameters of `per` elements each (grads are views).
struct Flat {
  at::Tensor grads;
  std::vector<xtrain::parallel::ReducerParam> params;
};

Flat make_flat(int64_t n, int64_t per) {
  Flat f;
  f.grads = at::empty({n}, at::kFloat);
  for (int64_t off = 0; off < n; off += per) {
    const int64_t k = std::min(per, n - off);
    at::Tensor p = at::zeros({k}, at::kFloat).requires_grad_(true);
    p.mutable_grad() = f.grads.narrow(0, off, k);
    f.params.push_back({p, off, k});
  }
  return f;
}

// Alternates the two sides `reps` times (so machine noise hits both alike); median seconds of each.
template <class A, class B>
std::pair<double, double> side_by_side(int reps, A&& a, B&& b) {
  std::vector<double> ta, tb;
  for (int i = 0; i < reps + 2; ++i) {  // two warm-up rounds
    auto t0 = Clock::now();
    a();
    const double da = seconds_since(t0);
    t0 = Clock::now();
    b();
    const double db = seconds_since(t0);
    if (i >= 2) ta.push_back(da), tb.push_back(db);
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2]};
}

void bandwidth(const std::shared_ptr<Communicator>& comm, c10d::ProcessGroupGloo& raw, int reps) {
  const int W = comm->size();
  if (comm->rank() == 0) {
    std::printf("gradient averaging of a flat fp32 buffer: raw = one c10d allreduce + div_; ours = BucketReducer\n"
                "(4 buckets of the buffer, arrival records, post-scale); GB/s = buffer bytes / time\n");
    std::printf("%-10s %-7s %12s %12s %12s %12s %8s\n", "elements", "MB", "raw ms", "raw GB/s", "ours ms",
                "ours GB/s", "ours/raw");
  }
  for (int64_t n : {int64_t(1) << 18, int64_t(1) << 20, int64_t(1) << 22, int64_t(1) << 24}) {
    Flat f = make_flat(n, 1 << 16);
    xtrain::parallel::ReducerOptions o;
    o.bucket_size = n / 4;
    o.overlap = false;
    xtrain::parallel::BucketReducer reducer(comm, f.params, f.grads, o);
    f.grads.fill_(comm->rank() + 1.0);
    reducer.finish();  // check first: the mean of 1..W everywhere
    if (f.grads.sub((W + 1) / 2.0).abs().max().item<double>() > 1e-6) {
      std::printf("WRONG RESULT at n=%lld\n", static_cast<long long>(n));
    }
    at::Tensor t = at::ones({n}, at::kFloat);
    std::vector<at::Tensor> v{t};
    const auto [raw_s, ours_s] = side_by_side(
        reps, [&] { raw.allreduce(v)->wait(); t.div_(W); }, [&] { reducer.finish(); });
    const double mb = n * 4 / 1e6;
    if (comm->rank() == 0) {
      std::printf("%-10lld %-7.1f %12.3f %12.3f %12.3f %12.3f %8.2f\n", static_cast<long long>(n), mb, raw_s * 1e3,
                  mb / 1e3 / raw_s, ours_s * 1e3, mb / 1e3 / ours_s, raw_s / ours_s);
    }
  }
}

// Communicator::reduce_scatter (a ring in kRingPieceElements pieces; bf16 widened a piece at a
// time) against one raw c10d allreduce of the same fp32 buffer: a reduce-scatter moves half an
// all-reduce's bytes, so ours/raw near 0.5 means the pieces cost nothing extra.
void reduce_scatter_cost(Communicator& comm, c10d::ProcessGroupGloo& raw, int reps) {
  const int W = comm.size();
  if (comm.rank() == 0) {
    std::printf("\nreduce-scatter of a buffer (ours; fp32 and bf16 input) vs raw c10d allreduce of it in fp32\n");
    std::printf("%-10s %-7s %12s %12s %12s %10s %10s\n", "elements", "MB fp32", "raw AR ms", "ours fp32", "ours bf16",
                "fp32/raw", "bf16/raw");
  }
  for (int64_t n : {int64_t(1) << 20, int64_t(1) << 22, int64_t(1) << 24, int64_t(1) << 25}) {
    at::Tensor t = at::ones({n}, at::kFloat);
    std::vector<at::Tensor> v{t};
    at::Tensor in32 = at::full({n}, comm.rank() + 1.0, at::kFloat), out32 = at::empty({n / W}, at::kFloat);
    at::Tensor in16 = in32.to(at::kBFloat16), out16 = at::empty({n / W}, at::kBFloat16);
    comm.reduce_scatter(in16, out16);
    if (out16.to(at::kFloat).sub(W * (W + 1) / 2.0).abs().max().item<double>() > 0) {
      std::printf("WRONG RESULT at n=%lld\n", static_cast<long long>(n));
    }
    const auto [raw_s, ours32_s] = side_by_side(
        reps, [&] { raw.allreduce(v)->wait(); }, [&] { comm.reduce_scatter(in32, out32); });
    const auto [raw2_s, ours16_s] = side_by_side(
        reps, [&] { raw.allreduce(v)->wait(); }, [&] { comm.reduce_scatter(in16, out16); });
    const double raw_med = std::min(raw_s, raw2_s);
    if (comm.rank() == 0) {
      std::printf("%-10lld %-7.1f %12.3f %12.3f %12.3f %10.2f %10.2f\n", static_cast<long long>(n), n * 4 / 1e6,
                  raw_med * 1e3, ours32_s * 1e3, ours16_s * 1e3, ours32_s / raw_med, ours16_s / raw_med);
    }
  }
}

void per_collective_cost(Communicator& comm, c10d::ProcessGroupGloo& raw, int reps) {
  at::Tensor t = at::ones({1}, at::kFloat);
  std::vector<at::Tensor> v{t};
  const int n = 100;
  const auto [raw_s, ours_s] = side_by_side(
      reps, [&] { for (int i = 0; i < n; ++i) raw.allreduce(v)->wait(); },
      [&] { for (int i = 0; i < n; ++i) comm.all_reduce(t); });
  if (comm.rank() == 0) {
    std::printf("\n1-element all_reduce (median of %d x %d): raw c10d %.1f us, Communicator %.1f us"
                " (arrival record + wrapper: %+.1f us per collective)\n",
                reps, n, raw_s / n * 1e6, ours_s / n * 1e6, (ours_s - raw_s) / n * 1e6);
  }
}

// Backward of a 6-layer 1024-wide MLP (6.3M parameters, 25 MB of fp32 gradients), one bucket per
// layer: no communication, overlap off, overlap on, interleaved round by round.
void overlap_share(const std::shared_ptr<Communicator>& comm, int reps) {
  const int64_t D = 1024, L = 6, B = 64;
  Flat f = make_flat(D * D * L, D * D);
  for (auto& p : f.params) p.param.detach().normal_(0, 1.0 / 32);
  at::Tensor x = at::randn({B, D});
  auto make = [&](bool communicate, bool overlap) {
    xtrain::parallel::ReducerOptions o;
    o.bucket_size = D * D;
    o.overlap = overlap;
    return std::make_unique<xtrain::parallel::BucketReducer>(communicate ? comm : Communicator::single(), f.params,
                                                             f.grads, o);
  };
  std::vector<double> t[3];
  for (int round = 0; round < reps + 2; ++round) {
    for (int k = 0; k < 3; ++k) {
      auto reducer = make(k > 0, k == 2);  // hooks of one reducer at a time
      const auto t0 = Clock::now();
      f.grads.zero_();
      reducer->set_boundary(true);
      at::Tensor h = x;
      for (const auto& p : f.params) h = at::tanh(at::matmul(h, p.param.view({D, D})));
      h.sum().backward();
      reducer->finish();
      if (round >= 2) t[k].push_back(seconds_since(t0));
    }
  }
  for (auto& v : t) std::sort(v.begin(), v.end());
  const double none = t[0][reps / 2], off = t[1][reps / 2], on = t[2][reps / 2];
  if (comm->rank() == 0) {
    const double exposed_off = off - none, exposed_on = on - none;
    std::printf("\nMLP backward + reduce (6 x 1024^2, batch 64, 1 thread), median of %d: no comm %.1f ms | "
                "overlap off %.1f ms | overlap on %.1f ms\ncommunication hidden by overlap: %.0f%% (%.1f of %.1f ms)\n",
                reps, none * 1e3, off * 1e3, on * 1e3,
                exposed_off > 0 ? 100.0 * (exposed_off - exposed_on) / exposed_off : 0.0,
                (exposed_off - exposed_on) * 1e3, exposed_off * 1e3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!std::getenv("RANK")) {  // the parent: start 2 ranks of this program
    return xtrain::bench::launch_self(2, {"--rank"});
  }
  at::set_num_threads(1);
  auto info = xtrain::comm::rank_info_from_env();
  auto comm = Communicator::create(info, xtrain::comm::CommOptions{});
  auto raw = raw_group(info.rank, info.world_size, info.master_port + 1);
  if (comm->rank() == 0) std::printf("2 ranks on this machine, Gloo over loopback, fp32, 1 intra-op thread per rank\n\n");
  const int reps = std::getenv("REPS") ? std::atoi(std::getenv("REPS")) : 9;
  bandwidth(comm, *raw, reps);
  per_collective_cost(*comm, *raw, reps);
  reduce_scatter_cost(*comm, *raw, reps);
  overlap_share(comm, reps);
  comm->barrier();
  return 0;
}
