// Internals shared by communicator.cpp and its collectives (collectives.cpp): the process group,
// the store, arrival records and the executor for composite operations. Included only by comm/*.cpp
// (it includes c10d through c10d_compat.h).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "xtrain/comm/c10d_compat.h"
#include "xtrain/comm/communicator.h"

namespace xtrain::comm {

// One thread running composite operations (the reduce-scatter ring) in submission order, so they
// can be asynchronous like c10d's own work.
class Executor {
 public:
  ~Executor();
  std::shared_future<void> submit(std::function<void()> task);

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// Writes arrival records to the store on its own thread, so a collective does not wait for a store
// round trip (~0.1 ms on loopback). A record only has to land before a peer's timeout (seconds)
// fires and only the latest one per key matters, so writes coalesce and happen at most every
// 10 ms: a collective costs a map update, and the store sees <= 100 writes a second per rank.
class ArrivalRecorder {
 public:
  ArrivalRecorder(std::mutex& store_mutex) : store_mutex_(store_mutex) {}
  ~ArrivalRecorder();  // writes what is pending, then stops
  void record(const compat::StorePtr& store, const std::string& key, const std::string& value);

 private:
  void loop();
  std::mutex& store_mutex_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::pair<const void*, std::string>, std::pair<compat::StorePtr, std::string>> pending_;
  bool stop_ = false;
  bool idle_ = false;  // the thread waits for work (else it is writing or pausing)
  std::thread thread_;
};

// State shared by the world communicator and every subgroup made from it.
struct Shared {
  RankInfo info;
  CommOptions options;
  std::vector<GlooDevice> gloo_devices;  // chosen once (interface.h), used by every group
  compat::StorePtr store;  // TCPStore client (rank 0 also hosts the server)
  std::mutex store_mutex;  // our store traffic is serialised
  int next_group = 1;
  std::unique_ptr<ArrivalRecorder> recorder;  // declared after the store: stopped before it goes
};

struct Communicator::Impl {
  std::shared_ptr<Shared> shared;  // null for world 1
  compat::StorePtr store;          // this group's prefix of the store
  compat::GlooPtr pg;              // null for world 1
  int rank = 0, size = 1;
  std::vector<int> global_ranks{0};
  std::string name = "world";
  std::chrono::milliseconds timeout{300000};
  std::atomic<int64_t> seq{0};
  mutable std::mutex stats_mutex;
  CommStats stats;
  std::unique_ptr<Executor> executor;  // created on first composite op
  std::mutex executor_mutex;

  // Records "<seq> <op>" for this rank (asynchronously), counts the call, its payload bytes and the
  // bytes it sends (CommStats), and returns seq.
  int64_t arrive(const std::string& op, int64_t bytes, int64_t sent_bytes);
  void count_p2p(int64_t bytes, bool sent);
  // The error for a failed or timed-out operation: op, seq, waited time, missing ranks, cause.
  CommError explain(const std::string& op, int64_t seq, double waited_s, const std::string& cause) const;
  std::vector<Arrival> read_arrivals(std::string* problem) const;
  Executor& exec();
};

// Wraps a c10d work (or an executor future) into our Work; `then` runs once after success.
using ImplPtr = std::shared_ptr<const Communicator::Impl>;
Work make_work(compat::WorkPtr work, std::function<void()> then, ImplPtr impl, std::string op, int64_t seq);
Work make_work(std::shared_future<void> future, std::function<void()> then, ImplPtr impl, std::string op,
               int64_t seq);

// Waits until every rank of the group has written rdzv/<rank>; CommError names the missing ranks.
void rendezvous(const compat::StorePtr& store, std::mutex& mutex, int rank, int size, std::chrono::milliseconds timeout,
                const std::string& what, const std::vector<int>& global_ranks);

}  // namespace xtrain::comm
