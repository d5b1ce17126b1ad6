// The launchers of one multi-node run (one `xtrain launch --nnodes N --node-rank i` per node) know of
// each other through a c10d TCPStore hosted by node 0's launcher at MASTER_PORT+1 (torchrun's c10d
// rendezvous backend keeps its store on one node the same way). A thread heart-beats a counter
// there; a node whose counter stops moving for `timeout_seconds`, a node that posts its group's
// failure, or a store that stops answering (node 0 gone) is a reason to stop the local ranks,
// naming the node. The same store holds the membership of each round (a round = one start of the
// group): fixed (`--nnodes N`: every node keeps its --node-rank) or elastic (`--nnodes MIN:MAX`:
// node 0 closes the round once MIN..MAX launchers arrived and every member of the previous round
// arrived or went silent; node ranks are assigned densely, node 0 first).
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace c10d {
class TCPStore;
}

namespace xtrain::launch {

struct PeerOptions {
  std::string master_addr;
  int port = 0;         // the store's port (MASTER_PORT + 1)
  bool host = false;    // node 0: hosts the store and closes elastic rounds
  double heartbeat_seconds = 0.5;
  double timeout_seconds = 5;     // --heartbeat-timeout
  double join_timeout_seconds = 300;  // --join-timeout: waiting for the other nodes at a round
  std::string id;       // unique per launcher ("<host name>:<pid>")
};

struct Membership {
  int round = 0;
  int node_rank = 0;
  int nnodes = 1;
  std::vector<std::string> members;  // launcher ids by node rank
};

class Peers {
 public:
  explicit Peers(PeerOptions options);
  ~Peers();
  Peers(const Peers&) = delete;
  Peers& operator=(const Peers&) = delete;

  // Fixed membership: this launcher is node `node_rank` of `nnodes` in round `round`; returns once
  // every node registered for that round (UsageError naming the missing nodes after the join timeout).
  Membership join_fixed(int round, int node_rank, int nnodes);
  // Elastic: joins round `round` (or a later one, if that one closed without this launcher) and
  // returns the membership once node 0 closes it; nullopt when the run finished first.
  std::optional<Membership> join_elastic(int round, int min_nodes, int max_nodes);
  // The round a launcher that starts now should join (0, or the one after the running round).
  int next_round();
  // While the group runs: a reason to stop the local ranks ("" while every node is well).
  std::string check();
  // This node's group failed (or was stopped for `why`): the other nodes stop at once.
  void report_failure(const std::string& why);
  // This node's ranks finished. Node 0 then waits (bounded) for the others before its store goes.
  void finish();

  const std::string& id() const { return options_.id; }

 private:
  struct RoundWait {
    int64_t count = -1;
    std::chrono::steady_clock::time_point changed;
  };
  void heartbeat_loop_with(c10d::TCPStore& store);
  void watch_once(c10d::TCPStore& store);
  bool stale(const std::string& id);
  void start_round(const Membership& m);
  std::vector<std::string> arrived_ids(int round, int64_t count);
  bool close_round(int round, int min_nodes, int max_nodes, RoundWait& wait);

  PeerOptions options_;
  std::unique_ptr<c10d::TCPStore> store_;  // the main thread's client (node 0: the server)
  std::thread thread_;                     // heart-beats and watches through its own client
  std::mutex mu_;
  bool stop_ = false, store_lost_ = false;
  std::optional<Membership> current_;  // the running round
  std::string reason_;
  struct Seen {
    int64_t value = -1;
    std::chrono::steady_clock::time_point changed;
    bool done = false;
  };
  std::map<std::string, Seen> seen_;  // heartbeat counters of the launchers watched
};

// "<host name>:<pid>".
std::string launcher_id();
// "N" -> {N, N}; "MIN:MAX" -> {MIN, MAX}; UsageError naming --nnodes otherwise.
std::pair<int, int> parse_nnodes(const std::string& text);

}  // namespace xtrain::launch
