// Peers: the launchers' shared store, heartbeats and rounds; see peers.h. Keys (all small strings):
//   hb/<id>              counter, +1 per heartbeat      done/<id>        that launcher's ranks finished
//   r<R>/node<k>         fixed rounds: node k's id      r<R>/arrived     elastic rounds: arrivals
//   r<R>/id<i>           elastic: the i-th arrival      r<R>/members     elastic: ids by node rank
//   r<R>/failed          why round R's group stopped    round            the last closed elastic round
//   finished             node 0's group finished (launchers waiting to join exit)
#include "xtrain/launch/peers.h"

#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "xtrain/base/error.h"

namespace xtrain::launch {
namespace {

using Clock = std::chrono::steady_clock;

// Round 0 waits this long after MIN launchers arrived for more (up to MAX); later rounds wait this
// long after the last arrival once every member of the previous round is accounted for.
constexpr double kFirstRoundSettle = 10;
constexpr double kLaterRoundSettle = 1;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }
std::string rkey(int round, const std::string& name) { return c10::str("r", round, "/", name); }

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::chrono::milliseconds millis(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); }

std::unique_ptr<c10d::TCPStore> connect(const PeerOptions& o, bool server, double timeout_seconds) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(o.port);
  so.isServer = server;
  so.waitWorkers = false;
  so.timeout = millis(timeout_seconds);
  try {
    return std::make_unique<c10d::TCPStore>(o.master_addr, so);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    XTRAIN_USAGE_ERROR("launch: ", server ? "cannot host" : "cannot reach", " the launchers' store at ", o.master_addr,
                       ":", o.port, " (--master-port + 1", server ? "" : ", hosted by node 0's launcher", "): ",
                       what.substr(0, what.find('\n')),
                       server ? "; is the port free?" : "; start node 0's launcher, or check --master-addr");
  }
}

void sleep_for(double seconds) { std::this_thread::sleep_for(millis(seconds)); }

}  // namespace

std::string launcher_id() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return c10::str(host, ":", ::getpid());
}

std::pair<int, int> parse_nnodes(const std::string& t) {
  int lo = 0, hi = 0, used = 0;
  if (std::sscanf(t.c_str(), "%d:%d%n", &lo, &hi, &used) == 2 && size_t(used) == t.size()) {
    XTRAIN_USAGE_CHECK(lo >= 1 && hi >= lo, "launch: --nnodes MIN:MAX needs 1 <= MIN <= MAX, got ", t);
    return {lo, hi};
  }
  if (std::sscanf(t.c_str(), "%d%n", &lo, &used) == 1 && size_t(used) == t.size() && lo >= 0) return {lo, lo};
  XTRAIN_USAGE_ERROR("launch: --nnodes must be N or MIN:MAX (torchrun's form, e.g. 1:2), got '", t, "'");
}

Peers::Peers(PeerOptions options) : options_(std::move(options)) {
  store_ = connect(options_, options_.host, options_.join_timeout_seconds);
  store_->setTimeout(millis(options_.join_timeout_seconds));
  auto beat = connect(options_, false, options_.timeout_seconds);
  beat->add("hb/" + options_.id, 1);
  thread_ = std::thread([this, s = beat.release()] {
    std::unique_ptr<c10d::TCPStore> store(s);
    heartbeat_loop_with(*store);
  });
}

Peers::~Peers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Peers::heartbeat_loop_with(c10d::TCPStore& store) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    try {
      watch_once(store);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      std::lock_guard<std::mutex> lock(mu_);
      if (reason_.empty()) {
        reason_ = c10::str("the launchers' store on node 0 (", options_.master_addr, ":", options_.port,
                           ") stopped answering (", what.substr(0, what.find('\n')),
                           "): node 0's launcher is gone, and losing node 0 ends the run");
      }
      store_lost_ = true;
    }
    sleep_for(options_.heartbeat_seconds);
  }
}

// One heartbeat, then the state of the other members of the running round.
void Peers::watch_once(c10d::TCPStore& store) {
  store.add("hb/" + options_.id, 1);
  std::optional<Membership> cur;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cur = current_;
  }
  if (!cur) return;
  std::string why;
  if (store.check({rkey(cur->round, "failed")})) why = text(store.get(rkey(cur->round, "failed")));
  for (size_t k = 0; k < cur->members.size() && why.empty(); ++k) {
    const std::string& m = cur->members[k];
    if (m == options_.id) continue;
    const int64_t value = store.add("hb/" + m, 0);
    const bool done = store.check({"done/" + m});
    std::lock_guard<std::mutex> lock(mu_);
    Seen& s = seen_[m];
    if (s.value != value) {
      s.value = value;
      s.changed = Clock::now();
    }
    s.done = done;
    const double silent = std::chrono::duration<double>(Clock::now() - s.changed).count();
    if (!done && silent > options_.timeout_seconds) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", silent);
      why = c10::str("node ", k, " (", m, ") sent no heartbeat for ", secs, " s (--heartbeat-timeout ",
                     options_.timeout_seconds, "): its launcher or machine is gone");
    }
  }
  if (why.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (reason_.empty() && current_ && current_->round == cur->round) reason_ = why;
}

bool Peers::stale(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(id);
  if (it == seen_.end()) return false;
  return it->second.done ||
         std::chrono::duration<double>(Clock::now() - it->second.changed).count() > options_.timeout_seconds;
}

void Peers::start_round(const Membership& m) {
  std::lock_guard<std::mutex> lock(mu_);
  current_ = m;
  reason_.clear();
  for (const auto& id : m.members) seen_[id] = Seen{-1, Clock::now(), false};
}

Membership Peers::join_fixed(int round, int node_rank, int nnodes) {
  store_->set(rkey(round, c10::str("node", node_rank)), bytes(options_.id));
  std::vector<std::string> keys;
  for (int k = 0; k < nnodes; ++k) keys.push_back(rkey(round, c10::str("node", k)));
  const auto deadline = Clock::now() + millis(options_.join_timeout_seconds);
  for (;;) {
    std::string missing;
    for (int k = 0; k < nnodes; ++k) {
      if (!store_->check({keys[k]})) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    }
    if (missing.empty()) break;
    XTRAIN_USAGE_CHECK(Clock::now() < deadline, "launch: node(s) ", missing, " of --nnodes ", nnodes,
                       " did not join within ", options_.join_timeout_seconds,
                       " s (--join-timeout): start `xtrain launch --nnodes ", nnodes,
                       " --node-rank K --master-addr ", options_.master_addr, "` on each of them");
    sleep_for(0.1);
  }
  Membership m;
  m.round = round;
  m.node_rank = node_rank;
  m.nnodes = nnodes;
  for (const auto& key : keys) m.members.push_back(text(store_->get(key)));
  start_round(m);
  return m;
}

int Peers::next_round() {
  if (!store_->check({"round"})) return 0;
  return std::stoi(text(store_->get("round"))) + 1;
}

std::vector<std::string> Peers::arrived_ids(int round, int64_t count) {
  std::vector<std::string> ids;
  for (int64_t i = 0; i < count; ++i) {
    const std::string key = rkey(round, c10::str("id", i));
    if (store_->check({key})) ids.push_back(text(store_->get(key)));
  }
  return ids;
}

// Node 0: closes `round` when MIN..MAX launchers arrived, every member of the previous round
// arrived or went silent, and arrivals have settled. Returns whether it closed it.
bool Peers::close_round(int round, int min_nodes, int max_nodes, RoundWait& w) {
  const int64_t count = store_->add(rkey(round, "arrived"), 0);
  if (count != w.count) {
    w.count = count;
    w.changed = Clock::now();
  }
  const auto ids = arrived_ids(round, count);
  if (static_cast<int64_t>(ids.size()) < count || count < min_nodes) return false;
  std::vector<std::string> previous;
  if (round > 0 && store_->check({rkey(round - 1, "members")})) previous = split(text(store_->get(rkey(round - 1, "members"))));
  for (const auto& p : previous) {
    if (std::find(ids.begin(), ids.end(), p) == ids.end() && !stale(p)) return false;
  }
  const double settle = round == 0 || previous.empty() ? kFirstRoundSettle : kLaterRoundSettle;
  if (count < max_nodes && std::chrono::duration<double>(Clock::now() - w.changed).count() < settle) return false;
  std::vector<std::string> members{options_.id};
  for (const auto& id : ids) {
    if (id != options_.id && static_cast<int>(members.size()) < max_nodes) members.push_back(id);
  }
  store_->set(rkey(round, "members"), bytes(join(members)));
  store_->set("round", bytes(std::to_string(round)));
  return true;
}

std::optional<Membership> Peers::join_elastic(int round, int min_nodes, int max_nodes) {
  for (;; ++round) {
    const int64_t index = store_->add(rkey(round, "arrived"), 1) - 1;
    store_->set(rkey(round, c10::str("id", index)), bytes(options_.id));
    const auto deadline = Clock::now() + millis(options_.join_timeout_seconds);
    RoundWait wait{-1, Clock::now()};
    for (;;) {
      if (options_.host ? close_round(round, min_nodes, max_nodes, wait) : store_->check({rkey(round, "members")})) break;
      if (!options_.host && store_->check({"finished"})) return std::nullopt;
      XTRAIN_USAGE_CHECK(Clock::now() < deadline, "launch: fewer than --nnodes MIN=", min_nodes,
                         " launchers joined round ", round, " within ", options_.join_timeout_seconds,
                         " s (--join-timeout); ", store_->add(rkey(round, "arrived"), 0), " arrived");
      sleep_for(0.1);
    }
    const auto members = split(text(store_->get(rkey(round, "members"))));
    const auto it = std::find(members.begin(), members.end(), options_.id);
    if (it == members.end()) continue;  // closed without this launcher (full, or late): wait for the next round
    Membership m;
    m.round = round;
    m.node_rank = static_cast<int>(it - members.begin());
    m.nnodes = static_cast<int>(members.size());
    m.members = members;
    start_round(m);
    return m;
  }
}

std::string Peers::check() {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

void Peers::report_failure(const std::string& why) {
  std::optional<Membership> cur;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cur = current_;
    if (store_lost_) return;
  }
  if (!cur) return;
  try {
    const std::string key = rkey(cur->round, "failed");
    if (!store_->check({key})) store_->set(key, bytes(c10::str("node ", cur->node_rank, " (", options_.id, "): ", why)));
  } catch (const std::exception&) {  // the store is gone: the others notice that by themselves
  }
}

void Peers::finish() {
  std::optional<Membership> cur;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cur = current_;
    if (store_lost_) return;
  }
  try {
    store_->set("done/" + options_.id, bytes("1"));
    if (!options_.host || !cur) return;
    // Node 0's store must outlive the other nodes' last steps: wait until each finished or went silent.
    for (bool waiting = true; waiting; sleep_for(0.1)) {
      waiting = false;
      for (const auto& m : cur->members) waiting |= m != options_.id && !store_->check({"done/" + m}) && !stale(m);
    }
    store_->set("finished", bytes("1"));
    sleep_for(0.5);  // launchers waiting to join poll every 0.1 s
  } catch (const std::exception&) {
  }
}

}  // namespace xtrain::launch
