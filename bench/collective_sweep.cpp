// Time per collective against message size, for fitting the alpha-beta model of `xtrain plan`
// (bench/multi_node.py runs it on every node of a namespace cluster). One process per rank, joined
// through xtrain's Communicator from torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT): all_reduce (Gloo's ring), reduce_scatter and all_gather (xtrain's rings over
// send/recv) of fp32 buffers (bytes: the full buffer), a barrier before each repetition, the median of REPS. Rank 0 prints one JSON object per
// (op, bytes) line. Not a test: no reference result, only times.
//   RANK=0 WORLD_SIZE=1 build/bench/bench_collective_sweep [reps] [max_bytes]
#include <ATen/Functions.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "xtrain/comm/communicator.h"
#include "xtrain/comm/rank_info.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_op(xtrain::comm::Communicator& comm, int reps, F&& op) {
  op();  // warm-up: connections, buffers
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    comm.barrier();
    const auto start = Clock::now();
    op();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  // Every rank's time counts: a collective is done when the slowest rank is.
  return xtrain::comm::all_reduce_sum(comm, median(t)) / comm.size();
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const int64_t max_bytes = argc > 2 ? std::atoll(argv[2]) : (int64_t{64} << 20);
  auto comm = xtrain::comm::Communicator::create(xtrain::comm::rank_info_from_env(), xtrain::comm::CommOptions{}, 120);
  const int w = comm->size();
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const int64_t n = bytes / 4 / w * w;  // equal slices for reduce_scatter
    at::Tensor buf = at::ones({n}, at::kFloat), out = at::empty({n / w}, at::kFloat);
    const double ar = time_op(*comm, reps, [&] { comm->all_reduce(buf); });
    const double rs = time_op(*comm, reps, [&] { comm->reduce_scatter(buf, out); });
    const double ag = time_op(*comm, reps, [&] { comm->all_gather(out, buf); });
    if (comm->rank() == 0) {
      std::printf("{\"op\": \"all_reduce\", \"world\": %d, \"bytes\": %lld, \"seconds\": %.6e}\n", w, (long long)(n * 4), ar);
      std::printf("{\"op\": \"reduce_scatter\", \"world\": %d, \"bytes\": %lld, \"seconds\": %.6e}\n", w, (long long)(n * 4), rs);
      std::printf("{\"op\": \"all_gather\", \"world\": %d, \"bytes\": %lld, \"seconds\": %.6e}\n", w, (long long)(n * 4), ag);
      std::fflush(stdout);
    }
  }
  comm->barrier();
  return 0;
}
