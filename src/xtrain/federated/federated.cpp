#include "xtrain/federated/federated.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <memory>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/checkpoint/safetensors.h"
#include "xtrain/data/sampler.h"
#include "xtrain/data/splitmix64.h"
#include "xtrain/federated/client.h"
#include "xtrain/federated/output.h"
#include "xtrain/federated/secure_agg.h"
#include "xtrain/run/run_checks.h"
#include "xtrain/run/smoke.h"
#include "xtrain/run/train.h"
#include "xtrain/sched/schedule.h"

namespace xtrain::federated {

void validate(const FederatedOptions& o) {
  XTRAIN_USAGE_CHECK(o.clients >= 1, "--clients must be >= 1, got ", o.clients);
  XTRAIN_USAGE_CHECK(o.rounds >= 1, "--rounds must be >= 1, got ", o.rounds);
  XTRAIN_USAGE_CHECK(o.local_steps >= 1, "--local-steps must be >= 1, got ", o.local_steps);
  XTRAIN_USAGE_CHECK(o.fraction > 0.0 && o.fraction <= 1.0, "--fraction must be in (0, 1], got ", o.fraction);
  XTRAIN_USAGE_CHECK(o.prox_mu >= 0.0 && std::isfinite(o.prox_mu), "--prox-mu must be >= 0, got ", o.prox_mu);
  XTRAIN_USAGE_CHECK(o.dropout >= 0.0 && o.dropout < 1.0, "--dropout must be in [0, 1), got ", o.dropout);
  const auto& p = o.privacy;
  const bool any = p.clip != 0.0 || p.noise != 0.0 || p.delta != 0.0;
  if (any) {
    XTRAIN_USAGE_CHECK(p.clip > 0.0 && p.noise > 0.0 && p.delta > 0.0,
                       "differential privacy needs all of --dp-clip C > 0, --dp-noise SIGMA > 0 and --dp-delta D in (0, 1) "
                       "(got clip ", p.clip, ", noise ", p.noise, ", delta ", p.delta, ")");
    XTRAIN_USAGE_CHECK(p.delta < 1.0, "--dp-delta must be in (0, 1), got ", p.delta);
  }
}

namespace {

uint64_t seed_of(const FederatedOptions& o) { return static_cast<uint64_t>(o.seed); }

// What `xtrain federated` cannot simulate: one process trains every client in turn on a whole model.
void check_config(const config::Config& c) {
  XTRAIN_USAGE_CHECK(c.dp_world_size == 1, "xtrain federated simulates its clients in one process: run it without a "
                     "launcher (the environment says ", c.dp_world_size, " data-parallel ranks)");
  XTRAIN_USAGE_CHECK(c.tensor_parallel.size == 1 && c.pipeline.stages == 1,
                     "xtrain federated trains whole models: tensor_parallel.size and pipeline.stages must be 1");
  XTRAIN_USAGE_CHECK(c.zero_optimization.stage < 3, "xtrain federated: zero_optimization.stage 3 partitions the "
                     "parameters it averages; use stage 0-2 (one process: they behave alike)");
  XTRAIN_USAGE_CHECK(!c.curriculum_learning.enabled && !c.data.ordering.enabled,
                     "xtrain federated: curriculum_learning and xtrain.data.ordering order one training stream; each "
                     "client samples its own split (turn them off)");
}

// ceil(F K) of the clients that hold data, seeded by the round.
std::vector<int64_t> sample_clients(const std::vector<Client>& clients, double fraction, uint64_t seed, int64_t round) {
  std::vector<int64_t> pool;
  for (const auto& c : clients) {
    if (c.size() > 0) pool.push_back(c.id);
  }
  const auto want = static_cast<int64_t>(std::ceil(fraction * static_cast<double>(clients.size()) - 1e-9));
  const auto m = std::min<int64_t>(want, static_cast<int64_t>(pool.size()));
  data::SplitMix64 rng{data::epoch_seed(seed ^ 0x5a17ULL, round)};
  for (int64_t i = 0; i < m; ++i) std::swap(pool[i], pool[i + rng.below(pool.size() - i)]);
  pool.resize(m);
  std::sort(pool.begin(), pool.end());
  return pool;
}

struct Federation {
  FederatedOptions o;
  Setup s;
  std::vector<Client> clients;
  FlatParams layout;
  at::Tensor global;  // flat fp32
  std::unique_ptr<sched::Schedule> schedule;
  uint64_t client_key = 0;  // the clients' shared secret for mask seeds: never given to the server
};

// The server's float64 sum of the round's weighted updates and the total weight: through secure
// aggregation (masked ring vectors), or in the clear.
struct Aggregate {
  at::Tensor sum;  // float64 [numel]
  double weight = 0.0;
  double max_mask_error = 0.0;
  int64_t seeds_revealed = 0;
};

Aggregate aggregate(const Federation& f, int64_t round, const std::vector<int64_t>& sampled,
                    const std::vector<int64_t>& survivors, const std::vector<at::Tensor>& weighted) {
  Aggregate a;
  a.sum = at::zeros({f.layout.numel + 1}, at::kDouble);
  for (const auto& w : weighted) a.sum.add_(w);  // the plain sum: the server's result without masking
  if (f.o.secure_agg) {
    const int64_t n = static_cast<int64_t>(sampled.size());
    SecureAggregator server(f.layout.numel + 1);
    for (size_t i = 0; i < survivors.size(); ++i) {
      const MaskingClient client(survivors[i], round, f.client_key);
      server.receive(survivors[i], client.mask(encode_fixed(weighted[i], n), sampled));
    }
    std::vector<int64_t> dropped;
    std::set_difference(sampled.begin(), sampled.end(), survivors.begin(), survivors.end(), std::back_inserter(dropped));
    const at::Tensor unmasked = decode_fixed(server.unmasked_sum(dropped, [&](int64_t survivor, int64_t d) {
      return MaskingClient(survivor, round, f.client_key).reveal(d);
    }));
    a.max_mask_error = (unmasked - a.sum).abs().max().item<double>();
    a.sum = unmasked;
    a.seeds_revealed = server.seeds_revealed();
  }
  a.weight = a.sum[f.layout.numel].item<double>();
  a.sum = a.sum.narrow(0, 0, f.layout.numel);
  return a;
}

// Local training of the survivors; returns each one's weighted update [w u, w] (float64) and
// records the mean loss of each local step.
std::vector<at::Tensor> train_survivors(Federation& f, int64_t round, const std::vector<int64_t>& survivors,
                                        std::vector<double>& step_loss) {
  const int64_t E = f.o.local_steps;
  std::vector<double> lrs;
  for (int64_t k = 0; k < E; ++k) lrs.push_back(f.schedule->lr_after((round - 1) * E + k));
  step_loss.assign(E, 0.0);
  std::vector<at::Tensor> weighted;
  for (int64_t id : survivors) {
    Client& c = f.clients[id];
    LocalResult r = train_client(f.s, c, f.layout, f.global, lrs, f.o.prox_mu);
    for (int64_t k = 0; k < E; ++k) step_loss[k] += r.step_losses[k] / static_cast<double>(survivors.size());
    // DP: clipped, uniform weights (privacy.h); otherwise weighted by the client's sample count.
    double w = static_cast<double>(c.size());
    if (f.o.privacy.enabled()) {
      clip_update(r.update, f.o.privacy.clip);
      w = 1.0;
    }
    at::Tensor v = at::empty({f.layout.numel + 1}, at::kDouble);
    v.narrow(0, 0, f.layout.numel).copy_(r.update).mul_(w);
    v[f.layout.numel] = w;
    weighted.push_back(v);
  }
  return weighted;
}

RoundReport run_round(Federation& f, int64_t round) {
  const auto t0 = std::chrono::steady_clock::now();
  RoundReport rep;
  rep.round = round;
  const auto sampled = sample_clients(f.clients, f.o.fraction, seed_of(f.o), round);
  std::vector<int64_t> survivors;
  data::SplitMix64 drop{data::epoch_seed(seed_of(f.o) ^ 0xd7089ULL, round)};
  for (int64_t id : sampled) {
    if (!(drop.uniform() < f.o.dropout)) survivors.push_back(id);
  }
  rep.sampled = static_cast<int64_t>(sampled.size());
  rep.dropped = rep.sampled - static_cast<int64_t>(survivors.size());
  std::vector<double> step_loss;
  const auto weighted = train_survivors(f, round, survivors, step_loss);
  for (size_t k = 0; k < step_loss.size() && !survivors.empty(); ++k) {
    f.schedule->observe((round - 1) * f.o.local_steps + static_cast<int64_t>(k) + 1, step_loss[k]);
  }
  rep.train_loss = step_loss.empty() || survivors.empty() ? NAN : step_loss.back();
  const int64_t P = f.layout.numel;
  rep.bytes_down = rep.sampled * P * 4;
  if (!survivors.empty()) {
    Aggregate a = aggregate(f, round, sampled, survivors, weighted);
    rep.max_mask_error = a.max_mask_error;
    const auto n = static_cast<int64_t>(survivors.size());
    // In the clear a client sends its fp32 weights and sample count (the server forms the float64
    // update: the same numbers); with DP its clipped float64 update; with secure aggregation ring values.
    const int64_t plain = f.o.privacy.enabled() ? P * 8 + 8 : P * 4 + 8;
    rep.bytes_up = f.o.secure_agg ? n * (P + 1) * 8 + a.seeds_revealed * 8 : n * plain;
    if (f.o.privacy.enabled()) {  // central Gaussian noise on the sum, then the mean over the clients
      auto gen = at::make_generator<at::CPUGeneratorImpl>(data::epoch_seed(seed_of(f.o) ^ 0x9015eULL, round));
      a.sum.add_(at::normal(0.0, f.o.privacy.noise * f.o.privacy.clip, {P}, gen, at::kDouble));
    }
    f.global = (f.global.to(at::kDouble) + a.sum / a.weight).to(at::kFloat);
  }
  // Every round counts (a round where everyone dropped released nothing: an upper bound still).
  if (f.o.privacy.enabled()) rep.epsilon = rdp_epsilon(f.o.privacy.noise, round, f.o.privacy.delta);
  load_flat(*f.s.model.module, f.layout, f.global);
  const auto& c = f.s.config;
  rep.eval = evaluate(f.s.model, *f.s.data.val, c, c.trainer.eval_batches);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

std::vector<Client> make_clients(const Setup& s, const FederatedOptions& o) {
  const ClientIndices parts = split_dataset(*s.data.train, o.split, o.clients, seed_of(o));
  std::vector<Client> clients;
  for (int64_t k = 0; k < o.clients; ++k) clients.push_back(make_client(s, k, parts[k]));
  return clients;
}

}  // namespace

FederatedResult run_federated(const FederatedOptions& requested) {
  validate(requested);
  FederatedOptions options = requested;
  if (smoke::enabled()) {  // XTRAIN_SMOKE: the config shrinks (load_run_config); so do rounds and local steps
    options.rounds = smoke::cap(options.rounds, 2);
    options.local_steps = smoke::cap(options.local_steps, 2);
  }
  TrainRequest request;
  request.config_path = options.config_path;
  request.overrides = options.overrides;
  const auto loaded = load_run_config(request, "");
  for (const auto& w : loaded.warnings) log::warn(w);
  check_run_config(loaded.config);
  check_config(loaded.config);
  if (loaded.config.trainer.threads > 0) at::set_num_threads(static_cast<int>(loaded.config.trainer.threads));
  Federation f{options, build(loaded.config)};
  if (f.o.seed < 0) f.o.seed = f.s.config.trainer.seed;
  f.layout = flat_layout(*f.s.model.module);
  f.global = flatten(*f.s.model.module, f.layout);
  f.s.engine.reset();        // each client trains through its own Engine
  f.s.train_loader.reset();  // and draws from its own split (client.h)
  f.schedule = sched::make_schedule(f.s.config.scheduler, f.s.config.optimizer.lr());
  f.client_key = data::epoch_seed(seed_of(f.o) ^ 0xc11e27ULL, 0);
  f.clients = make_clients(f.s, f.o);
  FederatedResult result;
  for (const auto& c : f.clients) result.client_sizes.push_back(c.size());
  RunOutput out(f.o, f.s, result.client_sizes, f.layout.numel);
  for (int64_t r = 1; r <= f.o.rounds; ++r) {
    result.rounds.push_back(run_round(f, r));
    out.round(result.rounds.back());
  }
  out.finish(result.rounds);
  const auto params = f.s.model.module->named_parameters(/*recurse=*/true);
  for (size_t i = 0; i < f.layout.names.size(); ++i) {
    result.parameters.emplace_back(f.layout.names[i], params[f.layout.names[i]].detach().clone());
  }
  // The global model's weights, under the names `xtrain export --safetensors` writes for a run.
  if (!f.o.output.empty()) checkpoint::write_safetensors(f.o.output + "/model.safetensors", result.parameters);
  return result;
}

}  // namespace xtrain::federated
