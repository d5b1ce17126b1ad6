// DeepSpeed's hostfile ("host slots=N" per line, '#' comments) and its --include/--exclude
// filters ("host[:slot,slot][@host...]"), as pure functions. Host names must match a strict
// pattern (letters, digits, '.', '-', '_'; not starting with '-'), so a name from a file can never
// become an ssh option or shell syntax. Reference: deepspeed/launcher/runner.py (fetch_hostfile,
// parse_resource_filter).
#pragma once
#include <string>
#include <vector>

namespace xtrain::launch {

struct HostEntry {
  std::string host;
  int slots = 0;
};

// Errors (UsageError naming `origin` and the line): bad line, bad or duplicate host, slots < 1, no
// hosts at all.
std::vector<HostEntry> parse_hostfile(const std::string& text, const std::string& origin = "hostfile");
std::vector<HostEntry> read_hostfile(const std::string& path);

bool valid_host_name(const std::string& host);

struct NodeSlots {
  std::string host;
  std::vector<int> slots;  // slot indices on that host, ascending
};

// Applies --include or --exclude (mutually exclusive), then --nnodes (first N hosts) and
// --nproc-per-node (first N selected slots per host); <= 0 means "all". Hosts left with no slot
// are dropped; hostfile order is kept. UsageError for unknown hosts or slots.
std::vector<NodeSlots> select_slots(const std::vector<HostEntry>& hosts, const std::string& include,
                                    const std::string& exclude, int num_nodes = 0, int slots_per_node = 0);

}  // namespace xtrain::launch
