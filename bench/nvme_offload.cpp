// NVMe offload of the optimizer state: (a) the disk's sequential O_DIRECT bandwidth, fio-style
// (fio when installed, else our own io_uring loop: 1 MiB requests, queue depth 8), then (b)
// NvmeOptimizerState::step (AdamW, bf16 grads) on a large shard with the read/step/write pipeline
// and with aio.overlap_events=false (everything in order), and the ratios: pipelined vs serial, and
// the achieved I/O time vs what the sequential bandwidth allows. First checks the state against the
// in-memory optimizer on a small shard.
//   bench_nvme_offload --dir /path/on/nvme [--file-gb 4] [--numel 250000000] [--sub-group 25000000] [--steps 2]
#include <ATen/Functions.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "xtrain/base/stopwatch.h"
#include "xtrain/base/threads.h"
#include "xtrain/optim/optimizer.h"
#include "xtrain/zero/offload/nvme_optimizer.h"
#include "xtrain/zero/offload/uring_file.h"

namespace {

using xtrain::Stopwatch;
namespace zero = xtrain::zero;
namespace optim = xtrain::optim;

constexpr double kGB = 1e9;

optim::OptimizerOptions adamw() {
  optim::OptimizerOptions o;
  o.type = "AdamW";
  o.adam.lr = 1e-3;
  o.adam.weight_decay = 0.1;
  return o;
}

bool check(const std::string& dir) {
  const int64_t n = 1000003;
  const std::vector<optim::Segment> segments{{0, n, 0, 0}};
  zero::NvmeOptimizerState nvme(dir, 0, n, adamw(), {}, {}, 300000);
  auto ref = optim::make_optimizer(adamw());
  ref->init_state(n);
  auto master = at::randn({n});
  nvme.initialize(master);
  for (int s = 0; s < 3; ++s) {
    optim::StepInputs in;
    in.grads = at::randn({n}).to(at::kBFloat16);
    in.segments = &segments;
    nvme.step(in, [](int64_t, const at::Tensor&) {});
    in.params = master;
    ref->step(in);
  }
  return nvme.read("master").equal(master) && nvme.read("exp_avg").equal(ref->state()[0].second) &&
         nvme.read("exp_avg_sq").equal(ref->state()[1].second);
}

// Sequential O_DIRECT write then read of `bytes`, 1 MiB requests, 8 in flight: GB/s each.
std::pair<double, double> sequential(const std::string& dir, int64_t bytes) {
  if (std::system("command -v fio >/dev/null 2>&1") == 0) {
    std::printf("sequential: fio is installed; run it for reference:\n  fio --name=w --filename=%s/fio.bin "
                "--rw=write --bs=1M --iodepth=8 --direct=1 --ioengine=io_uring --size=%lld && fio --name=r "
                "--filename=%s/fio.bin --rw=read --bs=1M --iodepth=8 --direct=1 --ioengine=io_uring --size=%lld\n",
                dir.c_str(), static_cast<long long>(bytes), dir.c_str(), static_cast<long long>(bytes));
  }
  std::printf("sequential: own io_uring loop (UringFile), 1 MiB requests, queue depth 8, O_DIRECT\n");
  zero::AioOptions aio;
  aio.block_size = 1 << 20;
  aio.queue_depth = 8;
  const std::string path = dir + "/bench_seq.bin";
  double write_bw = 0, read_bw = 0;
  {
    zero::UringFile f(path, aio);
    if (!f.direct()) std::printf("WARNING: no O_DIRECT on %s: page-cache numbers\n", dir.c_str());
    f.allocate(bytes);
    const int64_t op = 64 << 20;  // bytes per submit; the ring keeps 8 requests in flight across them
    auto buf = zero::aligned_float_buffer(op / 4).uniform_();
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<int64_t> tickets;
      Stopwatch t;
      for (int64_t off = 0; off < bytes; off += op) {
        tickets.push_back(pass == 0 ? f.submit_write(buf.data_ptr(), op, off) : f.submit_read(buf.data_ptr(), op, off));
      }
      for (auto k : tickets) f.wait(k);
      (pass == 0 ? write_bw : read_bw) = static_cast<double>(bytes) / t.seconds() / kGB;
    }
  }
  std::filesystem::remove(path);
  return {write_bw, read_bw};
}

// The fastest of `steps` steps after a warm-up one.
zero::NvmeOptimizerState::IoStats optimizer_steps(const std::string& dir, int64_t numel, int64_t sub_group,
                                                  bool overlap, int steps, const at::Tensor& grads,
                                                  const at::Tensor& params_out) {
  zero::AioOptions aio;  // DeepSpeed's defaults: 1 MiB blocks, queue depth 8
  aio.overlap_events = overlap;
  zero::NvmeOptimizerState nvme(dir, 0, numel, adamw(), {}, aio, sub_group);
  nvme.initialize(params_out.to(at::kFloat));
  const std::vector<optim::Segment> segments{{0, numel, 0, 0}};
  optim::StepInputs in;
  in.grads = grads;
  in.segments = &segments;
  nvme.step(in, params_out);  // warm-up
  zero::NvmeOptimizerState::IoStats best;
  best.total_s = 1e30;
  for (int s = 0; s < steps; ++s) {
    nvme.step(in, params_out);
    const auto st = nvme.last_step_stats();
    std::printf("  %s step: %.2f s (waited for reads %.2f s, writes %.2f s; optimizer %.2f s), %.2f GB read, "
                "%.2f GB written, %.2f GB/s read+write\n",
                overlap ? "pipelined" : "serial   ", st.total_s, st.read_s, st.write_s, st.step_s,
                static_cast<double>(st.bytes_read) / kGB, static_cast<double>(st.bytes_written) / kGB,
                static_cast<double>(st.bytes_read + st.bytes_written) / st.total_s / kGB);
    std::fflush(stdout);
    if (st.total_s < best.total_s) best = st;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  xtrain::threads::ensure_loader_environment(argc, argv);
  std::string dir;
  double file_gb = 4;
  int64_t numel = 250000000, sub_group = 25000000;
  int steps = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--dir") dir = argv[i + 1];
    if (k == "--file-gb") file_gb = std::stod(argv[i + 1]);
    if (k == "--numel") numel = std::stoll(argv[i + 1]);
    if (k == "--sub-group") sub_group = std::stoll(argv[i + 1]);
    if (k == "--steps") steps = std::stoi(argv[i + 1]);
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: bench_nvme_offload --dir DIR [--file-gb 4] [--numel N] [--sub-group N] [--steps 2]\n");
    return 2;
  }
  std::printf("check against the in-memory optimizer: %s\n", check(dir) ? "ok" : "FAIL");
  const auto [write_bw, read_bw] = sequential(dir, static_cast<int64_t>(file_gb * kGB) / (64 << 20) * (64 << 20));
  std::printf("sequential write %.2f GB/s, read %.2f GB/s (%.1f GB file)\n", write_bw, read_bw, file_gb);

  std::printf("NvmeOptimizerState::step, AdamW, %lld elements (%.2f GB of fp32 state), sub_group_size %lld, "
              "bf16 grads\n", static_cast<long long>(numel), 12.0 * static_cast<double>(numel) / kGB,
              static_cast<long long>(sub_group));
  const auto grads = at::randn({numel}).mul_(1e-3).to(at::kBFloat16);
  auto params_out = at::randn({numel}).to(at::kBFloat16);
  const auto piped = optimizer_steps(dir, numel, sub_group, true, steps, grads, params_out);
  const auto serial = optimizer_steps(dir, numel, sub_group, false, steps, grads, params_out);
  // Sequential reference for the bytes one step moves (reads and writes one after the other).
  const double io_floor = static_cast<double>(piped.bytes_read) / (read_bw * kGB) +
                          static_cast<double>(piped.bytes_written) / (write_bw * kGB);
  std::printf("best step: pipelined %.2f s, serial %.2f s -> pipelined/serial %.2fx faster\n", piped.total_s,
              serial.total_s, serial.total_s / piped.total_s);
  std::printf("the step's reads at the sequential read bandwidth, then its writes at the write bandwidth: %.2f s "
              "-> pipelined step %.2fx that, serial %.2fx; optimizer compute alone %.2f s\n",
              io_floor, piped.total_s / io_floor, serial.total_s / io_floor, serial.step_s);
  return 0;
}
