// The xtrain side of bench/cpu_train.sh: our GPT and Engine (AdamW, grad clipping 1.0) on random
// tokens, built from a ds_config like any run, timed exactly as bench/peers/gpt_peer.py times
// PyTorch (forward + backward + clip + step per step, median after warm-up). Prints one JSON line
// with the peer's fields plus the model FLOPs per token, the memory pool and the GEMM routing.
// "--profile" adds a per-op self-time table of the timed steps (RecordFunction callbacks) on stderr.
//   bench_gpt_train --layers 4 --d 256 --heads 4 --seq 256 --batch 8 --vocab 256 --threads 2 --dtype fp32
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/base/memory_pool.h"
#include "xtrain/base/threads.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/kernels/gemm.h"
#include "xtrain/models/factory.h"

namespace {

struct Args {
  int64_t layers = 4, d = 256, heads = 4, seq = 256, batch = 8, vocab = 256, steps = 20, warmup = 3, threads = 2;
  std::string dtype = "fp32";
  bool pool = true, profile = false;
};

Args parse(int argc, char** argv) {
  Args a;
  std::map<std::string, int64_t*> ints = {{"--layers", &a.layers}, {"--d", &a.d},         {"--heads", &a.heads},
                                          {"--seq", &a.seq},       {"--batch", &a.batch}, {"--vocab", &a.vocab},
                                          {"--steps", &a.steps},   {"--warmup", &a.warmup}, {"--threads", &a.threads}};
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--no-pool") {
      a.pool = false;
    } else if (k == "--profile") {
      a.profile = true;
    } else if (k == "--dtype" && i + 1 < argc) {
      a.dtype = argv[++i];
    } else if (ints.count(k) && i + 1 < argc) {
      *ints[k] = std::atoll(argv[++i]);
    } else {
      XTRAIN_USAGE_ERROR("bench_gpt_train: unknown or incomplete argument ", k);
    }
  }
  XTRAIN_USAGE_CHECK(a.dtype == "fp32" || a.dtype == "bf16", "bench_gpt_train: --dtype fp32|bf16, got ", a.dtype);
  return a;
}

std::string config_text(const Args& a) {
  return c10::str(R"({"train_micro_batch_size_per_gpu": )", a.batch, R"(, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
    "gradient_clipping": 1.0, "bf16": {"enabled": )", a.dtype == "bf16" ? "true" : "false", R"(},
    "xtrain": {"model": {"type": "gpt", "layers": )", a.layers, R"(, "d_model": )", a.d, R"(, "heads": )", a.heads,
                  R"(, "seq_len": )", a.seq, R"(, "vocab": )", a.vocab, R"(, "dropout": 0.0}, "threads": )", a.threads,
                  "}}");
}

// Self time per op name (inclusive time minus that of ops nested in it), all threads.
class OpProfile {
 public:
  void start() {
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&OpProfile::enter, &OpProfile::leave)
                                        .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  }
  void stop() { at::removeCallback(handle_); }
  void print(int64_t steps) const;

 private:
  struct Frame {
    std::string name;
    std::chrono::steady_clock::time_point t0;
    double child = 0;
  };
  static std::vector<Frame>& stack() {
    thread_local std::vector<Frame> s;
    return s;
  }
  static std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& fn) {
    stack().push_back({fn.name(), std::chrono::steady_clock::now(), 0});
    return nullptr;
  }
  static void leave(const at::RecordFunction&, at::ObserverContext*) {
    auto& s = stack();
    if (s.empty()) return;
    const Frame f = s.back();
    s.pop_back();
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - f.t0).count();
    if (!s.empty()) s.back().child += total;
    std::lock_guard<std::mutex> lock(mu());
    auto& e = table()[f.name];
    e.first += total - f.child;
    e.second += 1;
  }
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::map<std::string, std::pair<double, int64_t>>& table() {
    static std::map<std::string, std::pair<double, int64_t>> t;
    return t;
  }
  at::CallbackHandle handle_ = 0;
};

void OpProfile::print(int64_t steps) const {
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (const auto& [name, e] : table()) {
    rows.emplace_back(e.first, name);
    total += e.first;
  }
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(stderr, "%-44s %10s %8s %8s\n", "op (self time)", "ms/step", "%", "calls");
  for (size_t i = 0; i < std::min<size_t>(rows.size(), 30); ++i) {
    const auto& e = table()[rows[i].second];
    std::fprintf(stderr, "%-44s %10.2f %7.1f%% %8.1f\n", rows[i].second.c_str(), 1e3 * rows[i].first / steps,
                 100 * rows[i].first / total, static_cast<double>(e.second) / steps);
  }
  std::fprintf(stderr, "%-44s %10.2f\n", "total in ops", 1e3 * total / steps);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int run(const Args& a) {
  xtrain::base::MemoryPoolOptions pool;
  pool.enabled = a.pool;
  xtrain::memory_pool::install(pool);
  const auto applied = xtrain::threads::apply(xtrain::threads::decide(a.threads));
  std::fprintf(stderr, "%s\n", applied.describe().c_str());
  auto loaded = xtrain::config::load_text(config_text(a), {{}, 1, /*quiet=*/true});
  torch::manual_seed(0);
  auto model = xtrain::models::build_model(loaded.config.model);
  const int64_t V = a.vocab;
  auto forward = model.forward;
  std::unique_ptr<xtrain::Engine> engine;
  try {
    engine = std::make_unique<xtrain::Engine>(
        model.module,
        [forward, V](const xtrain::data::Batch& b) {
          const auto logits = forward(b.input);
          return at::cross_entropy_loss(logits.reshape({-1, V}).to(at::kFloat), b.target.reshape({-1}));
        },
        loaded.config);
  } catch (const std::exception& e) {
    if (a.dtype != "bf16") throw;
    std::printf("{\"impl\": \"xtrain\", \"dtype\": \"bf16\", \"threads\": %lld, \"error\": \"n/a (bf16 not supported yet)\"}\n",
                static_cast<long long>(a.threads));
    std::fprintf(stderr, "bf16: %s\n", e.what());
    return 0;
  }
  const auto data = at::randint(0, V, {a.batch, a.seq + 1});
  const xtrain::data::Batch batch{data.narrow(1, 0, a.seq).contiguous(), data.narrow(1, 1, a.seq).contiguous()};
  engine->train(true);
  OpProfile profile;
  std::vector<double> times;
  double first_loss = NAN, loss = NAN;
  for (int64_t i = 0; i < a.warmup + a.steps; ++i) {
    if (a.profile && i == a.warmup) profile.start();
    const auto t0 = std::chrono::steady_clock::now();
    engine->backward(engine->forward(batch));
    engine->step();
    loss = engine->last_step().loss;
    if (i >= a.warmup) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (i == 0) first_loss = loss;
  }
  if (a.profile) {
    profile.stop();
    profile.print(a.steps);
  }
  // Check: a fresh GPT-2-initialised model predicts nearly uniformly, and training lowers the loss.
  std::fprintf(stderr, "check: first loss %.4f vs ln(V) %.4f (%s); final %.4f (%s)\n", first_loss,
               std::log(static_cast<double>(V)), std::abs(first_loss / std::log(static_cast<double>(V)) - 1) < 0.05 ? "ok" : "FAIL",
               loss, loss < first_loss ? "ok" : "FAIL");
  std::fprintf(stderr, "%s\n%s", xtrain::memory_pool::describe(xtrain::memory_pool::stats()).c_str(),
               xtrain::kernels::gemm_routing_report(false).c_str());
  const double step = median(times);
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  const auto ps = xtrain::memory_pool::stats();
  std::printf(
      "{\"impl\": \"xtrain\", \"dtype\": \"%s\", \"threads\": %d, \"params\": %lld, \"step_ms\": %.3f, "
      "\"tokens_per_s\": %.1f, \"peak_rss_mb\": %.1f, \"final_loss\": %.5f, \"flops_per_token\": %.0f, "
      "\"pool\": %s, \"pool_peak_mb\": %.1f, \"pool_hit_rate\": %.4f}\n",
      a.dtype.c_str(), applied.aten, static_cast<long long>(engine->num_parameters()), step * 1e3,
      a.batch * a.seq / step, ru.ru_maxrss / 1024.0, loss, xtrain::models::gpt_flops_per_token(loaded.config.model),
      a.pool ? "true" : "false", ps.peak_bytes_reserved / 1048576.0,
      ps.allocations ? static_cast<double>(ps.cache_hits) / ps.allocations : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  xtrain::threads::ensure_loader_environment(argc, argv);
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt_train: %s\n", e.what());
    return 1;
  }
}
