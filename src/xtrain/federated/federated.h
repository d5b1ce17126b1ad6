// `xtrain federated`: K clients simulated in one process, each with its own split of the config's
// training set (split.h). Each round the server samples ceil(F K) clients (seeded); each starts from
// the global weights and takes E optimizer steps with the config's optimizer through a fresh Engine
// (the run loop's model, loss and engine: one client holding everything, fraction 1, one round
// reproduces `xtrain train`'s parameters bit for bit). FedProx adds mu/2 ||w - w_global||^2 to the
// local loss. The server averages the updates weighted by the clients' sample counts (FedAvg), in
// float64; optionally through secure aggregation (secure_agg.h), with clients dropping out after
// masking (--dropout), and with client-level DP (privacy.h).
//
// The learning rate follows the config's schedule on the server's clock: local step k of round r
// uses the schedule's lr after (r - 1) E + k - 1 steps (the Adaptive schedule observes the mean
// client loss of each local step). Each client's optimizer state starts fresh every round (its
// moments are not sent). Buffers that are not parameters (BatchNorm statistics) are not averaged:
// one model object trains every client in turn, so they carry over from client to client.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/federated/privacy.h"
#include "xtrain/federated/split.h"
#include "xtrain/run/evaluate.h"

namespace xtrain::federated {

struct FederatedOptions {
  std::string config_path;             // "" = built-in defaults
  std::vector<std::string> overrides;  // --set
  int64_t clients = 0, rounds = 0, local_steps = 0;
  double fraction = 0.0;
  SplitSpec split;
  double prox_mu = 0.0;
  bool secure_agg = false;
  double dropout = 0.0;
  PrivacyOptions privacy;
  // Sampling, split, dropout, masks, noise (-1: the config's xtrain.seed, which also builds the model).
  int64_t seed = -1;
  std::string output;                  // "" = no files; else metrics.jsonl, config.json, summary.json
  bool quiet = false;                  // no per-round lines (tests)
};

// UsageError naming the flag for a value out of range.
void validate(const FederatedOptions& options);

struct RoundReport {
  int64_t round = 0;
  int64_t sampled = 0, dropped = 0;
  double train_loss = 0.0;     // mean over the survivors' last local step
  EvalResult eval;             // the global model on the validation split
  int64_t bytes_up = 0, bytes_down = 0;
  double epsilon = -1.0;       // DP: after this round
  double max_mask_error = 0.0; // secure aggregation: |masked sum - plain float64 sum|, max over coordinates
  double seconds = 0.0;
};

struct FederatedResult {
  std::vector<RoundReport> rounds;
  std::vector<int64_t> client_sizes;
  std::vector<std::pair<std::string, at::Tensor>> parameters;  // the final global model, fp32
};

FederatedResult run_federated(const FederatedOptions& options);

}  // namespace xtrain::federated
