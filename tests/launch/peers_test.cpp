// Launchers on several nodes that watch each other (launch/peers.h), run as real `xtrain launch
// --nnodes N --node-rank i` processes on loopback with /bin/sh ranks: a launcher killed by SIGKILL
// (with its ranks) stops the other node's ranks within seconds, naming the node; so does node 0's
// loss and a failing rank on another node; nodes that finish at different times all exit 0; and
// under --nnodes MIN:MAX the survivors re-form a smaller group, which a returning node rejoins at
// the next restart.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/launch/launcher.h"
#include "xtrain/launch/peers.h"

namespace xtrain::launch::peers_test {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Waits until `path` exists (the ranks touch files to say where they are).
bool wait_for_file(const std::string& path, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

std::string read(const std::string& path);

// Waits until the file at `path` contains `text` (a launcher's log line).
bool wait_for_text(const std::string& path, const std::string& text, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (read(path).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

struct Node {
  testing::Process process;
  std::string log;
};

// One `xtrain launch` of a run whose ranks are `sh -c script sh --output DIR`; $D in the script
// is the test's folder.
class Cluster {
 public:
  explicit Cluster(const std::string& tag) : dir_(testing::temp_dir(tag)), port_(testing::free_port()) {}
  Node start(const std::string& nnodes, int node_rank, const std::string& script, const std::string& extra = "") {
    Node n;
    n.log = dir_ + "/launcher" + std::to_string(count_++) + ".log";
    std::vector<std::string> argv{testing::xtrain_binary(), "launch", "-N", "2", "--nnodes", nnodes, "--node-rank",
                                  std::to_string(node_rank), "--master-addr", "127.0.0.1", "--master-port",
                                  std::to_string(port_), "--heartbeat-timeout", "2", "--grace-seconds", "2",
                                  "--join-timeout", "60", "--program", "/bin/sh"};
    std::stringstream words(extra);
    for (std::string w; words >> w;) argv.push_back(w);
    for (const std::string& w : {std::string("--"), std::string("-c"), "D=" + dir_ + "; " + script, std::string("sh"),
                                 std::string("--output"), dir_ + "/run"}) {
      argv.push_back(w);
    }
    n.process = testing::Process::start(argv, {}, n.log);
    return n;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int port_;
  int count_ = 0;
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Peers, ParseNnodes) {
  EXPECT_EQ(parse_nnodes("2"), std::make_pair(2, 2));
  EXPECT_EQ(parse_nnodes("1:3"), std::make_pair(1, 3));
  EXPECT_THROW(parse_nnodes("3:1"), UsageError);
  EXPECT_THROW(parse_nnodes("0:2"), UsageError);
  EXPECT_THROW(parse_nnodes("two"), UsageError);
  EXPECT_THROW(parse_nnodes("1:2:3"), UsageError);
}

TEST(Peers, SeveralNodesNeedAMasterAddress) {
  LaunchOptions o;
  o.nnodes = 2;
  o.program = "/bin/true";
  o.args = {"x"};
  try {
    launch(o);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "--nnodes 2 needs --master-addr")) << e.what();
  }
}

// Each rank touches $D/up.<RANK>, then sleeps far longer than the test waits.
const std::string kSleeper = "touch $D/up.$RANK; exec sleep 120";

TEST(Peers, AKilledLauncherStopsTheOtherNodesRanksWithinSeconds) {
  Cluster c("peers-kill");
  Node n0 = c.start("2", 0, kSleeper), n1 = c.start("2", 1, kSleeper);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(wait_for_file(c.dir() + "/up." + std::to_string(r), 30)) << read(n0.log);
  n1.process.signal(SIGKILL);  // node 1: its launcher, and its ranks with it (they die with their launcher)
  ASSERT_TRUE(n0.process.wait(20)) << "node 0's launcher still runs 20 s after node 1 died\n" << read(n0.log);
  EXPECT_NE(n0.process.exit_code(), 0);
  const std::string log = read(n0.log);
  EXPECT_TRUE(contains(log, "stopped this node's ranks: node 1 (")) << log;
  EXPECT_TRUE(contains(log, "sent no heartbeat for")) << log;
}

TEST(Peers, LosingNodeZeroStopsTheOthers) {
  Cluster c("peers-kill0");
  Node n0 = c.start("2", 0, kSleeper), n1 = c.start("2", 1, kSleeper);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(wait_for_file(c.dir() + "/up." + std::to_string(r), 30)) << read(n1.log);
  n0.process.signal(SIGKILL);
  ASSERT_TRUE(n1.process.wait(20)) << read(n1.log);
  EXPECT_NE(n1.process.exit_code(), 0);
  EXPECT_TRUE(contains(read(n1.log), "losing node 0 ends the run")) << read(n1.log);
}

TEST(Peers, AFailingRankOnAnotherNodeStopsThisOne) {
  Cluster c("peers-fail");
  const std::string script = "touch $D/up.$RANK; if [ $RANK = 3 ]; then sleep 1; exit 3; fi; exec sleep 120";
  Node n0 = c.start("2", 0, script), n1 = c.start("2", 1, script);
  ASSERT_TRUE(n1.process.wait(30)) << read(n1.log);
  EXPECT_EQ(n1.process.exit_code(), 3);
  ASSERT_TRUE(n0.process.wait(20)) << read(n0.log);
  EXPECT_TRUE(contains(read(n0.log), "node 1 (")) << read(n0.log);
  EXPECT_TRUE(contains(read(n0.log), "rank 3 exited with code 3")) << read(n0.log);
}

// Node 1's ranks run 4 s longer than node 0's (twice the heartbeat timeout): node 0's launcher keeps
// its store up until node 1 is done, and neither stops the other.
TEST(Peers, NodesThatFinishAtDifferentTimesBothSucceed) {
  Cluster c("peers-done");
  const std::string script = "sleep $((GROUP_RANK * 4)); echo done $RANK";
  Node n0 = c.start("2", 0, script), n1 = c.start("2", 1, script);
  ASSERT_TRUE(n0.process.wait(40)) << read(n0.log);
  ASSERT_TRUE(n1.process.wait(40)) << read(n1.log);
  EXPECT_EQ(n0.process.exit_code(), 0) << read(n0.log);
  EXPECT_EQ(n1.process.exit_code(), 0) << read(n1.log);
  EXPECT_TRUE(contains(read(n1.log), "[rank 3] done 3")) << read(n1.log);
}

// --nnodes 1:2: node 1 is lost, node 0 re-forms the group alone (world 2 instead of 4); a new
// launcher for the lost node waits, and joins when node 0's group restarts again (world 4).
// Each rank appends "<restart> <WORLD_SIZE> <GROUP_RANK>" to $D/seen.
TEST(Peers, ElasticGroupShrinksAndAReturningNodeRejoinsAtTheNextRestart) {
  Cluster c("peers-elastic");
  const std::string script =
      "echo \"$XTRAIN_RESTART_COUNT $WORLD_SIZE $GROUP_RANK\" >> $D/seen; touch $D/up.$XTRAIN_RESTART_COUNT.$RANK; "
      "case $XTRAIN_RESTART_COUNT in 0) exec sleep 120;; 1) while [ ! -e $D/go ]; do sleep 0.1; done; "
      "[ $RANK = 0 ] && exit 5; exec sleep 120;; esac";
  Node n0 = c.start("1:2", 0, script, "--max-restarts 2"), n1 = c.start("1:2", 1, script);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(wait_for_file(c.dir() + "/up.0." + std::to_string(r), 40)) << read(n0.log);
  n1.process.signal(SIGKILL);
  ASSERT_TRUE(wait_for_file(c.dir() + "/up.1.0", 30)) << read(n0.log);
  EXPECT_TRUE(contains(read(n0.log), "re-formed: 1 node (was 2), world size 2 (was 4)")) << read(n0.log);
  // Node 0's re-formed group committed a checkpoint: the returning node's rank must resume the run.
  fs::create_directories(c.dir() + "/run/checkpoints");
  std::ofstream(c.dir() + "/run/checkpoints/latest") << "global_step2\n";
  Node back = c.start("1:2", 1, "echo \"new $WORLD_SIZE $GROUP_RANK $*\" >> $D/seen");
  ASSERT_TRUE(wait_for_text(back.log, "joining round 2 of the run", 60)) << read(back.log);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // it waits for the next round, not this one
  EXPECT_FALSE(back.process.wait(0.1)) << read(back.log);
  std::ofstream(c.dir() + "/go") << "\n";  // node 0's rank 0 fails: restart 2 takes the new node in
  ASSERT_TRUE(back.process.wait(40)) << read(back.log);
  EXPECT_EQ(back.process.exit_code(), 0) << read(back.log);
  ASSERT_TRUE(n0.process.wait(40)) << read(n0.log);
  EXPECT_EQ(n0.process.exit_code(), 0) << read(n0.log);
  const std::string seen = read(c.dir() + "/seen");
  EXPECT_TRUE(contains(seen, "0 4 0") && contains(seen, "0 4 1")) << seen;  // both nodes at first
  EXPECT_TRUE(contains(seen, "1 2 0")) << seen;                             // node 0 alone
  EXPECT_TRUE(contains(seen, "2 4 0") && contains(seen, "new 4 1")) << seen;  // together again
  EXPECT_TRUE(contains(seen, "new 4 1 --output " + c.dir() + "/run --resume")) << seen;
  EXPECT_FALSE(contains(seen, "1 4")) << seen;
}

}  // namespace
}  // namespace xtrain::launch::peers_test
