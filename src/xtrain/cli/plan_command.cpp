// `xtrain plan`: memory per rank and step time of each parallel layout for a GPT shape on a cluster
// described by flags, and the layout to use (plan/cost_model.h). The training setup (batch triple,
// precision, zero stage, overlap_comm, communication_data_type) comes from a ds_config as `xtrain
// train` reads it; the model shape from the same config or a named preset (--model).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <memory>

#include "xtrain/base/error.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/config/config.h"
#include "xtrain/plan/inputs.h"
#include "xtrain/plan/report.h"

namespace xtrain::cli {
namespace {

struct PlanArgs {
  std::string config, preset;
  std::vector<std::string> overrides;
  int64_t nodes = 1, gpus_per_node = 1, tp = 0, pp = 0;
  std::string intra_bw, inter_bw, intra_alpha = "5us", inter_alpha = "20us", memory, flops;
  double efficiency = 1.0, overlap_fraction = 0.5;
  bool json = false;
};

plan::Link link_of(const std::string& bw, const std::string& alpha, const char* bw_option, const char* alpha_option,
                   bool needed, const char* why) {
  if (bw.empty() && needed) XTRAIN_USAGE_ERROR("plan: ", bw_option, " is required ", why, " (e.g. ", bw_option, " 100Gbit/s)");
  plan::Link l;
  if (!bw.empty()) l.bytes_per_s = plan::parse_bandwidth(bw, bw_option);
  if (needed && l.bytes_per_s <= 0) XTRAIN_USAGE_ERROR("plan: ", bw_option, " must be > 0, got ", bw);
  l.alpha_s = plan::parse_seconds(alpha, alpha_option);
  return l;
}

int64_t dtype_bytes(const std::string& name, int64_t fallback) {
  if (name == "fp32") return 4;
  if (name == "bf16" || name == "fp16") return 2;
  return fallback;
}

int run_plan(const PlanArgs& a) {
  if (a.nodes < 1 || a.gpus_per_node < 1) XTRAIN_USAGE_ERROR("plan: --nodes and --gpus-per-node must be >= 1");
  if (a.efficiency <= 0 || a.efficiency > 1) XTRAIN_USAGE_ERROR("plan: --compute-efficiency must be in (0, 1], got ", a.efficiency);
  if (a.overlap_fraction < 0 || a.overlap_fraction > 1) XTRAIN_USAGE_ERROR("plan: --overlap-fraction must be in [0, 1], got ", a.overlap_fraction);
  plan::Cluster c;
  c.nodes = a.nodes;
  c.gpus_per_node = a.gpus_per_node;
  c.intra = link_of(a.intra_bw, a.intra_alpha, "--intra-bw", "--intra-alpha", a.gpus_per_node > 1, "with --gpus-per-node > 1");
  c.inter = link_of(a.inter_bw, a.inter_alpha, "--inter-bw", "--inter-alpha", a.nodes > 1, "with --nodes > 1");
  c.memory_bytes = plan::parse_bytes(a.memory, "--memory-per-gpu");
  c.flops_per_s = plan::parse_flops(a.flops, "--flops-per-gpu") * a.efficiency;

  config::LoadOptions lo;
  if (!a.preset.empty()) lo.overrides = plan::preset_overrides(a.preset);
  lo.overrides.insert(lo.overrides.end(), a.overrides.begin(), a.overrides.end());  // --set wins over the preset
  lo.world_size = c.world();
  lo.quiet = true;
  const auto loaded = config::load(a.config, lo);
  const config::Config& cfg = loaded.config;
  if (cfg.model.type != "gpt") {
    XTRAIN_USAGE_ERROR("plan: models a GPT; xtrain.model.type is ", cfg.model.type,
                       " (use a preset such as --model gpt2-small, or --set xtrain.model.type=gpt)");
  }
  plan::ModelShape m{cfg.model.layers, cfg.model.d_model, cfg.model.heads, cfg.model.vocab, cfg.model.seq_len,
                     cfg.model.tie_embeddings};
  plan::Training t;
  t.zero_stage = cfg.zero_optimization.stage;
  t.micro_batch = cfg.engine.train_micro_batch_size_per_gpu.value_or(1);
  t.train_batch = cfg.engine.train_batch_size.value_or(t.micro_batch * c.world());
  t.param_bytes = cfg.bf16.enabled || cfg.fp16.enabled ? 2 : 4;
  t.comm_bytes = dtype_bytes(cfg.engine.communication_data_type, t.param_bytes);
  std::string opt = cfg.optimizer.type;
  std::transform(opt.begin(), opt.end(), opt.begin(), ::tolower);
  t.state_floats = opt == "sgd" ? 1 : 2;
  t.overlap_comm = cfg.zero_optimization.overlap();
  t.overlap_fraction = a.overlap_fraction;
  t.activation_checkpointing = cfg.activation_checkpointing.enabled;

  const plan::Plan p = plan::make_plan(m, c, t, a.tp, a.pp);
  std::cout << (a.json ? plan::format_json(p, m, c, t) : plan::format_text(p, m, c, t)) << std::endl;
  return 0;
}

}  // namespace

Command add_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Memory per rank and step time of DP, ZeRO-1/2/3, TP x DP, PP x DP and 3D "
                                         "layouts for a GPT on a cluster, and the layout to use (an alpha-beta "
                                         "model; docs/scaling.md)");
  auto a = std::make_shared<PlanArgs>();
  cmd->add_option("--config,-c", a->config, "ds_config.json: batch triple, bf16/fp16, zero_optimization, "
                                            "communication_data_type, xtrain.model (the shape)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set,-s", a->overrides, "override a key by dotted path");
  cmd->add_option("--model", a->preset, "a named GPT shape: default, gpt2-small, gpt2-medium, gpt2-large, gpt2-xl, 7b, 13b");
  cmd->add_option("--nodes", a->nodes, "nodes")->capture_default_str();
  cmd->add_option("--gpus-per-node", a->gpus_per_node, "ranks per node")->capture_default_str();
  cmd->add_option("--intra-bw", a->intra_bw, "bandwidth inside a node per rank, with its unit: 900GB/s, 100Gbit/s");
  cmd->add_option("--inter-bw", a->inter_bw, "bandwidth between nodes per rank, with its unit: 400Gbit/s, 10gbit, 50GB/s");
  cmd->add_option("--intra-alpha", a->intra_alpha, "latency per message inside a node")->capture_default_str();
  cmd->add_option("--inter-alpha", a->inter_alpha, "latency per message between nodes")->capture_default_str();
  cmd->add_option("--memory-per-gpu", a->memory, "memory per rank: 80GB, 24GiB")->required();
  cmd->add_option("--flops-per-gpu", a->flops, "peak FLOP/s per rank in the training dtype: 312T, 1.5e12")->required();
  cmd->add_option("--compute-efficiency", a->efficiency, "share of --flops-per-gpu a training step achieves (MFU)")
      ->capture_default_str();
  cmd->add_option("--overlap-fraction", a->overlap_fraction,
                  "with overlap_comm: share of the gradient collectives that fit in backward which is hidden")
      ->capture_default_str();
  cmd->add_option("--tp", a->tp, "tensor-parallel degree of the TP x DP and 3D layouts (default: chosen)");
  cmd->add_option("--pp", a->pp, "pipeline degree of the PP x DP and 3D layouts (default: chosen)");
  cmd->add_flag("--json", a->json, "print JSON (bytes, seconds) instead of the table");
  return {cmd, [a] { return run_plan(*a); }};
}

}  // namespace xtrain::cli
