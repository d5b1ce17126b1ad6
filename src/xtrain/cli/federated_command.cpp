// `xtrain federated`: federated averaging over K simulated clients (federated/federated.h), with
// FedProx, secure aggregation, client dropout and client-level differential privacy.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "xtrain/base/error.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/federated/federated.h"

namespace xtrain::cli {
namespace {

struct FederatedArgs {
  federated::FederatedOptions o;
  std::string split = "iid";
};

}  // namespace

Command add_federated(CLI::App& app) {
  auto* cmd = app.add_subcommand("federated", "Federated averaging over simulated clients, each with its own split of "
                                              "the config's training set: FedAvg or FedProx, secure aggregation, "
                                              "client dropout, client-level differential privacy (README: Federated learning)");
  auto a = std::make_shared<FederatedArgs>();
  auto& o = a->o;
  cmd->add_option("--config,-c", o.config_path, "ds_config.json (model, data, optimizer: each client's local training)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set,-s", o.overrides, "override a key by dotted path");
  cmd->add_option("--clients", o.clients, "number of simulated clients K")->required();
  cmd->add_option("--rounds", o.rounds, "communication rounds R")->required();
  cmd->add_option("--fraction", o.fraction, "share of the clients sampled each round (ceil(F K) clients)")->required();
  cmd->add_option("--local-steps", o.local_steps, "optimizer steps each sampled client takes per round (E)")->required();
  cmd->add_option("--split", a->split, "iid | dirichlet:ALPHA (over labels) | contiguous (index ranges: text regions)")
      ->capture_default_str();
  cmd->add_option("--prox-mu", o.prox_mu, "FedProx: adds mu/2 ||w - w_global||^2 to each client's loss (0: FedAvg)");
  cmd->add_flag("--secure-agg", o.secure_agg, "pairwise masks that cancel in the sum: the server only holds masked updates");
  cmd->add_option("--dropout", o.dropout, "probability that a sampled client drops out after masking (seeded)");
  cmd->add_option("--dp-clip", o.privacy.clip, "DP: clip each client's update to this L2 norm C");
  cmd->add_option("--dp-noise", o.privacy.noise, "DP: Gaussian noise multiplier sigma (noise sigma*C on the sum)");
  cmd->add_option("--dp-delta", o.privacy.delta, "DP: the delta epsilon is reported for");
  cmd->add_option("--seed", o.seed, "seed of the split, client sampling, dropout, masks and noise (default: xtrain.seed)");
  cmd->add_option("--output,-o", o.output, "folder for config.json, metrics.jsonl (one line per round), summary.json, model.safetensors "
                                      "(the final global weights)");
  return {cmd, [a] {
            a->o.split = federated::parse_split(a->split);
            federated::run_federated(a->o);
            return 0;
          }};
}

}  // namespace xtrain::cli
