// Communicator: collectives over one process group (c10d Gloo; world 1 = no group at all, every
// collective a cheap local no-op). The one design choice: every collective records "<seq> <op>" for
// this rank in the TCPStore (from a background thread, coalesced, at most every 10 ms: about 1 us
// per collective, bench/RESULTS_dp.md), so a rank whose collective fails or times out can name the
// ranks that never reached it and the operation, instead of hanging (DeepSpeed users' recurring pain).
// bf16: reduce_scatter and all_reduce (a reduce-scatter then an all-gather, both rings over
// send/recv: Gloo has no bf16 sum) send bf16 and sum in fp32; broadcast/all_gather/send/recv move
// bf16 bytes unchanged.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "xtrain/comm/options.h"
#include "xtrain/comm/rank_info.h"

namespace xtrain::comm {

// A failed or timed-out collective: the message names the group, the operation, its sequence
// number and the ranks that did not arrive.
class CommError : public std::runtime_error {
 public:
  explicit CommError(const std::string& message) : std::runtime_error(message) {}
};

enum class ReduceOp { kSum, kAvg, kMax, kMin };

// Handle of an operation in flight. wait() is idempotent; it throws CommError on failure. A Work
// that is destroyed without wait() leaves the operation running (the tensors stay referenced).
class Work {
 public:
  Work();  // already complete
  void wait();
  bool completed() const;

  struct Impl;
  explicit Work(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

struct CommStats {
  int64_t collectives = 0;  // collectives launched (not counting send/recv)
  int64_t p2p = 0;          // sends and receives
  int64_t bytes = 0;        // payload bytes handed to collectives and sends
  // Calls of each collective (a bf16 all_reduce counts once, whatever it runs inside).
  int64_t all_reduces = 0, reduce_scatters = 0, all_gathers = 0, broadcasts = 0;
  // Bytes this rank puts on the wire: counted for our rings and send/recv; for Gloo's own algorithms
  // their share per rank (ring all-reduce 2(W-1)/W of the buffer, ring all-gather W-1 inputs,
  // broadcast (W-1)/W of the buffer: what the tree moves in total, divided by W).
  int64_t sent_bytes = 0;
};

class Communicator {
 public:
  // Joins the group described by `info` (TCPStore rendezvous at master_addr:master_port, rank 0
  // hosting it). Every rank must call it; CommError names the ranks that did not arrive within
  // options.timeout_seconds (or `rendezvous_timeout_s` when > 0: ranks may start far apart, as
  // torchrun's separate rendezvous timeout allows). World size 1 creates no store and no group.
  static std::shared_ptr<Communicator> create(const RankInfo& info, const CommOptions& options,
                                              double rendezvous_timeout_s = 0);
  static std::shared_ptr<Communicator> single();  // world 1

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;  // in this group
  int size() const;
  bool distributed() const { return size() > 1; }
  const std::vector<int>& global_ranks() const;  // group rank -> world rank
  std::string name() const;                      // "world" or "group 2 [0,2]"
  double timeout_seconds() const;

  // In place, over every rank of the group. async=false waits before returning.
  Work all_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::kSum, bool async = false);
  Work broadcast(const at::Tensor& tensor, int root = 0, bool async = false);
  // output (size() × input.numel() elements, contiguous) gets every rank's input in rank order.
  Work all_gather(const at::Tensor& input, const at::Tensor& output, bool async = false);
  // outputs[r] (contiguous, input's size and dtype; anywhere in memory) gets rank r's input.
  Work all_gather(const at::Tensor& input, const std::vector<at::Tensor>& outputs, bool async = false);
  // input: size() equal slices; rank r's output (slice-sized) gets the reduction of slice r.
  // A ring over send/recv: each rank sends (W-1)/W of the input, half of an all-reduce. The slices
  // go around in pieces, several in flight, so the extra memory is a few MiB (bf16 is widened to
  // fp32 a piece at a time), not a copy of the input. Callers that cast or stage a large input
  // before reducing it do so kRingPieceElements per slice at a time.
  static constexpr int64_t kRingPieceElements = int64_t{1} << 22;
  Work reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op = ReduceOp::kSum,
                      bool async = false);
  Work send(const at::Tensor& tensor, int dst, int tag = 0, bool async = false);
  Work recv(const at::Tensor& tensor, int src, int tag = 0, bool async = false);
  void barrier();

  // A subgroup of world ranks. Collective over this communicator: every rank calls it with the
  // same list, in the same order (as torch.distributed.new_group); non-members get nullptr.
  std::shared_ptr<Communicator> new_group(const std::vector<int>& world_ranks);

  CommStats stats() const;

  struct Impl;
  explicit Communicator(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;  // shared with Work handles in flight
};

// The sum of `value` over the group (one scalar all-reduce; `value` itself on a group of one).
double all_reduce_sum(Communicator& comm, double value);

// Root's string on every rank (a run directory name, a checkpoint tag): two broadcasts.
std::string broadcast_string(Communicator& comm, const std::string& value, int root = 0);

// Arrival records, as read back from the store after a failure: for each rank of the group, the
// last collective it started ("" when none).
struct Arrival {
  int64_t seq = 0;  // 0: this rank started no collective yet
  std::string op;
};
// "ranks 1, 3 did not arrive (rank 1 last started #16 broadcast; rank 3 none)" or, when everyone
// arrived, a note saying so. Pure, for tests.
std::string describe_arrivals(int64_t seq, const std::vector<Arrival>& arrivals, const std::vector<int>& global_ranks);

}  // namespace xtrain::comm
