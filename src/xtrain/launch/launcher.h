// `xtrain launch`: starts the ranks of one training run (locally, or over ssh from a hostfile),
// supervises them as one group, and with --max-restarts restarts the whole group from the latest
// checkpoint when any rank dies (elastic recovery). The train command must then name its run
// directory (--output): restarts add --resume when <output>/checkpoints/latest exists. The fault
// injection variable XTRAIN_FAULT_AT_STEP is passed to the first attempt only. With one launcher
// per node (--nnodes N > 1, or MIN:MAX) the launchers watch each other through a store on node 0
// (launch/peers.h): one node's failure stops every node's ranks within --heartbeat-timeout seconds,
// and a restart re-forms the group, at a new size under --nnodes MIN:MAX.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace xtrain::launch {

struct LaunchOptions {
  int nproc_per_node = 0;  // 0: 1 without a hostfile, every slot with one
  int nnodes = 0;          // 0: 1 without a hostfile, every host with one; the minimum when elastic
  int max_nnodes = 0;      // > 0: elastic (--nnodes MIN:MAX), one launcher per node
  int node_rank = 0;
  std::string master_addr;  // "": 127.0.0.1, or the hostfile's first host
  int master_port = 29500;
  std::string hostfile, include, exclude;
  int max_restarts = 0;
  double grace_seconds = 10;
  double heartbeat_timeout = 5;   // another node silent this long is gone
  double join_timeout = 300;      // waiting for the other nodes' launchers at each (re)start
  std::string program;            // "": this executable (xtrain)
  std::vector<std::string> args;  // the command after "--", e.g. {"train", "--config", "x.json"}
  int out_fd = 1, err_fd = 2;     // where prefixed rank output goes
};

// Runs the group (and its restarts). Returns the exit code for the launcher: 0, the first failing
// rank's code (128 + signal for a killed rank), or 128 + signal when the launcher was interrupted.
int launch(const LaunchOptions& options);

// The value of --output/-o/--output=... in a train command, if any.
std::optional<std::string> output_dir_of(const std::vector<std::string>& args);
// The command for a restart: `args` plus --resume when a checkpoint exists and it is missing.
std::vector<std::string> restart_args(const std::vector<std::string>& args, bool has_checkpoint);
// The tag in <run_dir>/checkpoints/latest, or "" when there is none.
std::string latest_checkpoint(const std::string& run_dir);

}  // namespace xtrain::launch
