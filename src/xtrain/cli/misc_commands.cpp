// `xtrain ckpt …` and `xtrain config`: checkpoint utilities and the config reference.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "xtrain/checkpoint/node_parts.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/base/error.h"
#include "xtrain/comm/rank_info.h"
#include "xtrain/config/config.h"
#include "xtrain/run/checkpoint_merge.h"
#include "xtrain/run/run_checks.h"

namespace xtrain::cli {

namespace {
// A checkpoint tag folder (has manifest.json), a checkpoints root or a run directory -> (root, tag).
std::pair<std::string, std::string> resolve_checkpoint(std::string path) {
  namespace fs = std::filesystem;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (fs::is_regular_file(path + "/manifest.json")) {
    const fs::path p(path);
    return {p.has_parent_path() ? p.parent_path().string() : ".", p.filename().string()};
  }
  for (const std::string& root : {path, path + "/checkpoints"}) {
    if (!checkpoint::latest_tag(root).empty()) return {root, ""};
  }
  XTRAIN_USAGE_ERROR("ckpt: ", path, " is neither a checkpoint folder, a checkpoints root nor a run directory");
}

// `consolidate PATH OUT [--node PATH]...`: node-local parts are gathered into a temporary folder first.
std::string consolidate_nodes(const std::string& in, const std::vector<std::string>& nodes, const std::string& out) {
  const auto [root, tag] = resolve_checkpoint(in);
  if (nodes.empty()) return write_merged_checkpoint(checkpoint::CheckpointReader(root, tag), out);
  std::vector<checkpoint::CheckpointReader> parts{checkpoint::CheckpointReader(root, tag)};
  for (const auto& n : nodes) {
    const auto [r, t] = resolve_checkpoint(n);
    parts.emplace_back(r, t);
  }
  const std::string tmp = out + "/.gather-nodes";
  std::filesystem::remove_all(tmp);
  checkpoint::gather_node_parts(parts, tmp);
  const std::string written = write_merged_checkpoint(checkpoint::CheckpointReader(tmp, parts.front().tag()), out);
  std::filesystem::remove_all(tmp);
  return written;
}
}  // namespace

Command add_ckpt(CLI::App& app) {
  auto* cmd = app.add_subcommand("ckpt", "Checkpoint utilities");
  cmd->require_subcommand(1);
  auto* fp = cmd->add_subcommand("fingerprint", "One hex digest over every model and optimizer tensor");
  auto path = std::make_shared<std::string>();
  fp->add_option("path", *path, "a run directory, a checkpoints folder, or one checkpoint tag folder")->required();
  auto nodes = std::make_shared<std::vector<std::string>>();  // checkpoint.use_node_local_storage
  fp->add_option("--node", *nodes, "another node's folder of the same checkpoint (node-local storage)");
  auto* cons = cmd->add_subcommand("consolidate", "One full fp32 checkpoint from a sharded one (ZeRO "
                                                  "partitions, tensor/pipeline-parallel ranks), loadable by a single "
                                                  "process (DeepSpeed's zero_to_fp32, Megatron's checkpoint merge)");
  auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  cons->add_option("path", *in, "a run directory, a checkpoints folder, or one checkpoint tag folder")->required();
  cons->add_option("out", *out, "checkpoints folder to write (the same tag, plus `latest`)")->required();
  cons->add_option("--node", *nodes, "another node's folder of the same checkpoint (checkpoint.use_node_local_storage: "
                                     "give every node's run directory)");
  return {cmd, [path, cons, in, out, nodes] {
            if (cons->parsed()) {
              std::cout << consolidate_nodes(*in, *nodes, *out) << std::endl;
              return 0;
            }
            nodes->insert(nodes->begin(), *path);
            std::cout << checkpoint::fingerprint_nodes(*nodes) << std::endl;
            return 0;
          }};
}

Command add_config(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "Check a config as `xtrain train` would (every check made before any work) "
                                           "and print it resolved (every key), or print the config reference");
  auto path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto docs = std::make_shared<bool>(false);
  auto world = std::make_shared<int64_t>(0);
  cmd->add_option("--config,-c", *path, "ds_config.json")->check(CLI::ExistingFile);
  cmd->add_option("--set,-s", *overrides, "override a key by dotted path");
  cmd->add_option("--world-size", *world, "ranks the batch triple is resolved for (default: from the environment, "
                                          "as `xtrain train` reads it; 1 without a launcher)");
  cmd->add_flag("--docs", *docs, "print the reference (docs/config.md)");
  return {cmd, [path, overrides, docs, world] {
            if (*docs) {
              std::cout << config::markdown_reference();
              return 0;
            }
            config::LoadOptions o;
            o.overrides = *overrides;
            o.world_size = *world > 0 ? *world : comm::rank_info_from_env().world_size;
            auto loaded = config::load(*path, o);
            for (const auto& w : loaded.warnings) std::cerr << "warning: " << w << "\n";
            for (const auto& n : loaded.notes) std::cerr << "config: " << n << "\n";
            check_run_config(loaded.config);
            std::cout << config::to_json(loaded.config) << std::endl;
            return 0;
          }};
}

std::vector<Command> all_commands(CLI::App& app) {
  return {add_train(app), add_eval(app), add_generate(app), add_ckpt(app), add_config(app),
          add_launch(app), add_tune(app), add_dashboard(app), add_compress(app), add_export(app), add_data(app),
          add_plan(app), add_serve(app), add_federated(app)};
}

}  // namespace xtrain::cli
