// Gradient communication in 16 bits (DeepSpeed's communication_data_type, Horovod's "compression"):
// the same small byte-level GPT trained on the same text with 2 ranks, once per ZeRO stage (0:
// bucketed all-reduce, 2: reduce-scatter) and wire dtype (fp32, bf16, fp16), fp32 training. Prints
// per run the bytes rank 0 sent per step (the Communicator's count: our rings exactly, Gloo's ring
// all-reduce by its formula), the training loss over the last steps, a held-out loss, the step
// time, and each against the fp32 run of its stage; an fp32 run from another initialisation shows
// how far two runs differ anyway (the noise floor). Before the table it checks one reduction
// against its closed form (a bf16 all-reduce of values whose sums bf16 holds exactly).
// Run: build/bench/bench_comm_dtype_bench [steps]   (re-launches itself as 2 ranks)
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launch_self.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/models/factory.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kSeq = 64, kBatch = 8, kVocab = 256;

std::string read_text() {
  for (const char* path : {"/usr/share/common-licenses/GPL-3", "README.md"}) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().size() > 10000) return ss.str();
  }
  std::fprintf(stderr, "comm_dtype_bench: no text found (/usr/share/common-licenses/GPL-3 or README.md)\n");
  std::exit(2);
}

// Windows of the text: the first 90% for training (rank r of step s reads its own batch), the rest held out.
struct Text {
  at::Tensor bytes;  // int64
  int64_t train_end = 0;
  xtrain::data::Batch window(int64_t start, int64_t count, int64_t stride) const {
    std::vector<at::Tensor> rows;
    for (int64_t i = 0; i < count; ++i) rows.push_back(bytes.narrow(0, start + i * stride, kSeq + 1));
    const auto x = at::stack(rows);
    return {x.narrow(1, 0, kSeq).contiguous(), x.narrow(1, 1, kSeq).contiguous()};
  }
  xtrain::data::Batch train_batch(int64_t step, int64_t rank, int64_t world) const {
    const int64_t span = train_end - kSeq - 1, stride = 97;  // co-prime walk through the training part
    const int64_t start = ((step * world + rank) * kBatch * stride * 13) % (span - kBatch * stride);
    return window(start, kBatch, stride);
  }
};

std::string config_text(int stage, const std::string& wire) {
  return c10::str(R"({"train_micro_batch_size_per_gpu": )", kBatch, R"(, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
    "gradient_clipping": 1.0, "zero_optimization": {"stage": )", stage, R"(, "reduce_bucket_size": 200000},)",
                  wire.empty() ? "" : c10::str(R"( "communication_data_type": ")", wire, R"(",)"),
                  R"( "xtrain": {"model": {"type": "gpt", "layers": 2, "d_model": 128, "heads": 4, "seq_len": )", kSeq,
                  R"(, "vocab": )", kVocab, R"(, "dropout": 0.0}}})");
}

struct Result {
  int stage = 0;
  std::string wire;  // "fp32 (seed 1)": the fp32 run from another initialisation, for the spread of runs
  double sent_per_step = 0, train_loss = 0, held_out = 0, step_ms = 0;
};

Result run(const std::shared_ptr<xtrain::comm::Communicator>& comm, const Text& text, int stage,
           const std::string& wire, int64_t steps, int64_t seed = 0) {
  xtrain::config::LoadOptions lo;
  lo.world_size = comm->size();
  lo.quiet = true;
  const auto cfg = xtrain::config::load_text(config_text(stage, wire), lo).config;
  torch::manual_seed(seed);
  auto model = xtrain::models::build_model(cfg.model);
  auto forward = model.forward;
  auto loss_of = [forward](const xtrain::data::Batch& b) {
    return at::cross_entropy_loss(forward(b.input).reshape({-1, kVocab}).to(at::kFloat), b.target.reshape({-1}));
  };
  xtrain::Engine engine(model.module, loss_of, cfg, comm);
  engine.train(true);
  const auto before = comm->stats();
  const auto t0 = Clock::now();
  double tail = 0;
  const int64_t tail_steps = std::min<int64_t>(10, steps);
  for (int64_t s = 0; s < steps; ++s) {
    engine.backward(engine.forward(text.train_batch(s, comm->rank(), comm->size())));
    engine.step();
    if (s >= steps - tail_steps) tail += engine.last_step().loss;
  }
  Result r{stage, wire.empty() ? (seed ? c10::str("fp32 (seed ", seed, ")") : "fp32") : wire};
  r.step_ms = 1e3 * std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(steps);
  r.sent_per_step = static_cast<double>(comm->stats().sent_bytes - before.sent_bytes) / static_cast<double>(steps);
  r.train_loss = tail / static_cast<double>(tail_steps);
  engine.train(false);
  at::NoGradGuard no_grad;
  const int64_t held = text.bytes.numel() - text.train_end - kSeq - 1;
  r.held_out = loss_of(text.window(text.train_end, 32, held / 32)).item<double>();
  return r;
}

// bf16 all-reduce of integers < 2^7 (exact in bf16): every rank must get the exact sum.
void check_reduction(xtrain::comm::Communicator& comm) {
  const auto x = (at::arange(1000, at::kLong).remainder(50) + comm.rank()).to(at::kBFloat16);
  auto sum = x.clone();
  comm.all_reduce(sum);
  const auto expect = at::arange(1000, at::kLong).remainder(50) * comm.size() + comm.size() * (comm.size() - 1) / 2;
  if (!sum.to(at::kLong).equal(expect)) {
    std::fprintf(stderr, "check FAILED: bf16 all-reduce differs from the exact sum\n");
    std::exit(1);
  }
  if (comm.rank() == 0) std::printf("check: bf16 all-reduce of 1000 exact values equals the closed form: ok\n\n");
}

void print(const std::vector<Result>& results, int64_t steps) {
  std::printf("2 ranks, 1 thread each; GPT 2 x 128 (byte-level, T=%lld, B=%lld per rank), fp32 training, AdamW, "
              "%lld steps\n\n", static_cast<long long>(kSeq), static_cast<long long>(kBatch), static_cast<long long>(steps));
  std::printf("| stage | wire dtype | KB sent/step (rank 0) | vs fp32 | train loss (last 10) | held-out loss | "
              "vs fp32 | ms/step | vs fp32 |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& r : results) {
    const Result* base = nullptr;
    for (const auto& b : results) {
      if (b.stage == r.stage && b.wire == "fp32") base = &b;
    }
    std::printf("| %d | %s | %.1f | %.3f | %.4f | %.4f | %+.4f | %.1f | %.2f |\n", r.stage, r.wire.c_str(),
                r.sent_per_step / 1024, r.sent_per_step / base->sent_per_step, r.train_loss, r.held_out,
                r.held_out - base->held_out, r.step_ms, r.step_ms / base->step_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!std::getenv("RANK")) {  // the parent: start 2 ranks of this program
    return xtrain::bench::launch_self(2, {argc > 1 ? argv[1] : "150"});
  }
  at::set_num_threads(1);
  const int64_t steps = std::atoll(argv[1]);
  auto comm = xtrain::comm::Communicator::create(xtrain::comm::rank_info_from_env(), xtrain::comm::CommOptions{});
  check_reduction(*comm);
  const std::string raw = read_text();
  Text text;
  std::vector<int64_t> bytes;
  for (unsigned char ch : raw) bytes.push_back(ch);
  text.bytes = at::tensor(bytes, at::kLong);
  text.train_end = text.bytes.numel() * 9 / 10;
  std::vector<Result> results;
  for (int stage : {0, 2}) {
    for (const std::string wire : {"", "bf16", "fp16"}) results.push_back(run(comm, text, stage, wire, steps));
    results.push_back(run(comm, text, stage, "", steps, /*seed=*/1));
  }
  if (comm->rank() == 0) print(results, steps);
  comm->barrier();
  return 0;
}
