// `xtrain launch [options] -- train --config …`: starts the ranks of one run (launch/launcher.h).
// Flags follow torchrun (--nproc-per-node, --nnodes, --node-rank, --master-addr, --master-port,
// --max-restarts, --nnodes MIN:MAX) and DeepSpeed (--hostfile, --include, --exclude).
#include <CLI/CLI.hpp>

#include "xtrain/cli/subcommands.h"
#include "xtrain/launch/launcher.h"
#include "xtrain/launch/peers.h"

namespace xtrain::cli {

Command add_launch(CLI::App& app) {
  auto* cmd = app.add_subcommand("launch", "Start the ranks of a distributed run: xtrain launch -N 2 -- train …");
  auto o = std::make_shared<launch::LaunchOptions>();
  cmd->add_option("--nproc-per-node,-N", o->nproc_per_node,
                  "ranks on this node (with --hostfile: at most this many slots per host)")
      ->check(CLI::NonNegativeNumber);
  auto nnodes = std::make_shared<std::string>();
  cmd->add_option("--nnodes", *nnodes,
                  "nodes, one launcher each; MIN:MAX: elastic, the group re-forms at 1..MAX nodes on a restart "
                  "(with --hostfile: use the first N hosts)");
  cmd->add_option("--node-rank", o->node_rank, "this node's index in [0, --nnodes)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--master-addr", o->master_addr, "address of rank 0's node (default 127.0.0.1 / first host)");
  cmd->add_option("--master-port", o->master_port, "rendezvous port on the master (default 29500)")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--max-restarts", o->max_restarts,
                  "restart every rank from the latest checkpoint when one dies, up to K times (needs train --output)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--hostfile,-H", o->hostfile, "DeepSpeed hostfile: lines 'HOST slots=N'")->check(CLI::ExistingFile);
  cmd->add_option("--include,-i", o->include, "only these hosts/slots: HOST[:SLOT,SLOT][@HOST...]");
  cmd->add_option("--exclude,-e", o->exclude, "all but these hosts/slots: HOST[:SLOT,SLOT][@HOST...]");
  cmd->add_option("--heartbeat-timeout", o->heartbeat_timeout,
                  "several nodes: another node's launcher silent this many seconds is gone (default 5)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--join-timeout", o->join_timeout,
                  "several nodes: seconds to wait for the other nodes' launchers at each (re)start (default 300)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--grace-seconds", o->grace_seconds, "SIGTERM to SIGKILL delay when stopping ranks (default 10)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--program", o->program, "run this executable instead of xtrain (a wrapper, or tests)");
  // The rank command, after "--" (CLI11 then takes every remaining word as positional).
  cmd->add_option("command", o->args, "the command each rank runs, after --: train --config …")->required();
  return {cmd, [o, nnodes] {
            if (!nnodes->empty()) {
              const auto [lo, hi] = launch::parse_nnodes(*nnodes);
              o->nnodes = lo;
              o->max_nnodes = nnodes->find(':') != std::string::npos ? hi : 0;
            }
            return launch::launch(*o);
          }};
}

}  // namespace xtrain::cli
