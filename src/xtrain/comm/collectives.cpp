// The collectives of Communicator. Each records its arrival, hands c10d Gloo a tensor of a type it
// supports (byte-moving ops view unsupported types as bytes), and returns a Work whose completion
// step copies back / averages. reduce_scatter is a ring over send/recv on the communicator's
// executor thread (Gloo in LibTorch 1.13 has no reduce_scatter), reducing and writing its output
// piece by piece, several pieces in flight; all_gather is the matching ring (Gloo's sends whole
// chunks); a bf16 all_reduce is that ring followed by a ring all-gather, so bf16 gradients
// travel as bf16 (communication_data_type) where widening them for Gloo would double the bytes.
#include <ATen/core/grad_mode.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/zeros.h>

#include "xtrain/comm/communicator_impl.h"

namespace xtrain::comm {
namespace {

constexpr int kRingTagBase = 1 << 24;  // user send/recv tags stay below this
constexpr int kRingAllGatherTagOffset = 1 << 25;  // a bf16 all_reduce's second ring

void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "comm: ", op, ": undefined tensor");
  TORCH_CHECK(t.is_contiguous(), "comm: ", op, ": the tensor must be contiguous (shape ", t.sizes(), ")");
}

// Types Gloo 1.13 reduces natively.
bool gloo_reduces(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kChar: case at::kByte: case at::kInt: case at::kLong:
      return true;
    default:
      return false;
  }
}

// For ops that only move bytes: the tensor itself when Gloo knows its type, else its bytes.
at::Tensor movable(const at::Tensor& t) {
  return gloo_reduces(t.scalar_type()) ? t : t.reshape({-1}).view(at::kByte);
}

// Where the reduction runs: the tensor itself, or an fp32 copy for bf16.
at::ScalarType reducible_type(at::ScalarType t) { return gloo_reduces(t) ? t : at::kFloat; }
void check_reducible(const at::Tensor& t, const char* op) {
  TORCH_CHECK(gloo_reduces(t.scalar_type()) || t.scalar_type() == at::kBFloat16, "comm: ", op, ": dtype ",
              t.scalar_type(), " cannot be reduced");
}
at::Tensor reducible(const at::Tensor& t, const char* op) {
  check_reducible(t, op);
  return gloo_reduces(t.scalar_type()) ? t : t.to(at::kFloat);
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return compat::max_op();
    case ReduceOp::kMin: return compat::min_op();
    default: return compat::sum_op();  // kAvg: sum, then divide
  }
}

void check_avg(ReduceOp op, const at::Tensor& t, const char* name) {
  TORCH_CHECK(op != ReduceOp::kAvg || at::isFloatingType(t.scalar_type()), "comm: ", name,
              ": ReduceOp::kAvg needs a floating-point tensor, got ", t.scalar_type());
}

int64_t nbytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

Work finish(Work w, bool async) {
  if (!async) w.wait();
  return w;
}

// out = a (op) b, element-wise.
void combine(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, ReduceOp op) {
  if (op == ReduceOp::kMax) {
    at::maximum_out(out, a, b);
  } else if (op == ReduceOp::kMin) {
    at::minimum_out(out, a, b);
  } else {
    at::add_out(out, a, b);
  }
}

// Ring reduce-scatter: W-1 steps; at step s rank r sends chunk (r-s-1) (its partial sum) to r+1
// and receives chunk (r-s-2) from r-1, adding its own contribution. After the last step chunk r
// holds every rank's contribution. Each rank sends (W-1)/W of the input once.
//
// The chunks go around in pieces, kRingDepth of them in flight at once: while one piece is added,
// and while Gloo's per-message handshake runs (the receiver announces its buffer before the sender
// writes), the link carries the others. Lock step (one piece out, wait, add, the next) ran at half
// the link's rate with both directions of a link busy, as on 2 ranks (1 Gbit/s, 64 MiB: 551 ms
// against 268 ms of wire time; pipelined: 287 ms). Working buffers are kRingDepth pieces in the type of the reduction (fp32 for
// bf16 input, widened a piece at a time; partial sums travel in fp32) however large the input: a
// stage-3 unit's gradients are reduced without a second copy of them.
//
// Every rank posts its sends and receives in the same order, so on each pair the k-th receive
// posted matches the k-th send (Gloo matches messages of one tag and peer in order).
constexpr int64_t kRingPiece = int64_t{1} << 18;
constexpr int kRingDepth = 8;

int ring_index(int i, int size) { return ((i % size) + size) % size; }

void ring_reduce_scatter(c10d::ProcessGroupGloo& pg, int rank, int size, const at::Tensor& input,
                         const at::Tensor& output, ReduceOp op, int tag) {
  if (size == 1) {
    output.copy_(input);
    return;
  }
  const int64_t n = input.numel() / size;
  const auto work_options = input.options().dtype(reducible_type(input.scalar_type()));
  const bool widen = work_options.dtype() != input.dtype();
  const int64_t piece = std::min(kRingPiece, std::max<int64_t>(n, 1));
  const int64_t pieces = (n + piece - 1) / piece;
  const int depth = static_cast<int>(std::min<int64_t>(kRingDepth, std::max<int64_t>(pieces, 1)));
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;

  struct Slot {
    int64_t off = 0, len = 0;
    int step = 0;
    bool active = false;
    at::Tensor acc, incoming, incoming_raw, result;
    compat::WorkPtr sent, received;
  };
  std::vector<Slot> slots(depth);
  for (auto& sl : slots) {
    sl.acc = at::empty({piece}, work_options);
    sl.incoming = at::empty({piece}, work_options);
    // The first hop carries a rank's own slice, not a partial sum: bf16 travels as bf16 (half the
    // bytes) and is widened on arrival, which gives the same fp32 values as widening before sending.
    if (widen) sl.incoming_raw = at::empty({piece}, input.options());
    if (widen || op == ReduceOp::kAvg) sl.result = at::empty({piece}, work_options);
  }
  auto slice = [&](const Slot& sl, int i) { return input.narrow(0, static_cast<int64_t>(i) * n + sl.off, sl.len); };
  auto post = [&](Slot& sl) {  // step sl.step's send (own slice or partial sum) and receive
    const bool raw = sl.step == 0 && widen;  // bf16 bytes (Gloo has no bf16 type)
    std::vector<at::Tensor> to_send{sl.step == 0 ? movable(slice(sl, ring_index(rank - 1, size)))
                                                 : sl.acc.narrow(0, 0, sl.len)};
    std::vector<at::Tensor> to_recv{raw ? movable(sl.incoming_raw.narrow(0, 0, sl.len)) : sl.incoming.narrow(0, 0, sl.len)};
    sl.sent = pg.send(to_send, next, tag);
    sl.received = pg.recv(to_recv, prev, tag);
  };
  int64_t next_piece = 0;
  auto start = [&](Slot& sl) {
    sl.active = next_piece < pieces;
    if (!sl.active) return;
    sl.off = next_piece++ * piece;
    sl.len = std::min(piece, n - sl.off);
    sl.step = 0;
    post(sl);
  };
  for (auto& sl : slots) start(sl);
  for (int active = depth; active > 0;) {
    for (auto& sl : slots) {
      if (!sl.active) continue;
      sl.received->wait();
      sl.sent->wait();  // acc is about to be overwritten
      auto in = sl.incoming.narrow(0, 0, sl.len);
      if (sl.step == 0 && widen) in.copy_(sl.incoming_raw.narrow(0, 0, sl.len));
      const int recv_idx = ring_index(rank - sl.step - 2, size);
      const bool last = sl.step == size - 2;
      at::Tensor target = !last ? sl.acc.narrow(0, 0, sl.len)
                                : sl.result.defined() ? sl.result.narrow(0, 0, sl.len) : output.narrow(0, sl.off, sl.len);
      combine(target, in, widen ? slice(sl, recv_idx).to(work_options.dtype()) : slice(sl, recv_idx), op);
      if (!last) {
        ++sl.step;
        post(sl);
        continue;
      }
      if (op == ReduceOp::kAvg) target.div_(size);
      if (sl.result.defined()) output.narrow(0, sl.off, sl.len).copy_(target);
      start(sl);
      if (!sl.active) --active;
    }
  }
}

// Bytes one rank sends in ring_reduce_scatter of W slices of `n` elements: its own slice on the
// first hop, partial sums (fp32 for bf16 input) on the W-2 others.
int64_t ring_reduce_scatter_bytes(int size, int64_t n, at::ScalarType dtype) {
  if (size <= 1) return 0;
  const int64_t in = static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t work = static_cast<int64_t>(c10::elementSize(reducible_type(dtype)));
  return n * (in + (size - 2) * work);
}

// Ring all-gather over send/recv: chunks[r] (W contiguous tensors of equal size, anywhere in
// memory) holds rank r's part on rank r; at step s rank r passes chunk (r-s) on to r+1 and receives
// chunk (r-s-1) from r-1. Each rank sends W-1 chunks. Over send/recv with our own tags (like the
// reduce-scatter ring), so it can run on the executor thread without taking a c10d collective tag
// out of order. In pieces: a piece received at step s is passed on as soon as it has arrived, while
// the rest of its chunk is still on the way; every receive is posted up front (they land in the
// chunks: no working memory). Gloo's own all-gather sends each chunk as one message: 64 MiB on 2
// nodes over 1 Gbit/s took it 439 ms, this ring 289 ms, the wire 268 ms (bench/collective_sweep).
void ring_all_gather(c10d::ProcessGroupGloo& pg, int rank, int size, const std::vector<at::Tensor>& chunks, int tag) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const int64_t chunk = chunks[0].numel();
  const int64_t piece = std::min(kRingPiece, std::max<int64_t>(chunk, 1));
  auto piece_of = [&](int idx, int64_t off) { return movable(chunks[idx].narrow(0, off, std::min(piece, chunk - off))); };
  std::vector<compat::WorkPtr> sent, received, arrived;
  for (int s = 0; s < size - 1; ++s) {
    const int send_idx = ring_index(rank - s, size), recv_idx = ring_index(rank - s - 1, size);
    received.clear();
    for (int64_t off = 0; off < chunk; off += piece) {
      std::vector<at::Tensor> to_recv{piece_of(recv_idx, off)};
      received.push_back(pg.recv(to_recv, prev, tag));
    }
    size_t k = 0;
    for (int64_t off = 0; off < chunk; off += piece, ++k) {
      if (s > 0) arrived[k]->wait();  // this piece of chunk send_idx came in at step s-1
      std::vector<at::Tensor> to_send{piece_of(send_idx, off)};
      sent.push_back(pg.send(to_send, next, tag));
    }
    arrived.swap(received);
  }
  for (auto& w : arrived) w->wait();
  for (auto& w : sent) w->wait();
}

std::vector<at::Tensor> chunks_of(const at::Tensor& flat, int size, int64_t chunk) {
  std::vector<at::Tensor> out;
  for (int r = 0; r < size; ++r) out.push_back(flat.narrow(0, r * chunk, chunk));
  return out;
}

}  // namespace

Work Communicator::all_reduce(const at::Tensor& tensor, ReduceOp op, bool async) {
  check_tensor(tensor, "all_reduce");
  check_avg(op, tensor, "all_reduce");
  if (!impl_->pg) return Work();
  const int size = impl_->size;
  if (tensor.scalar_type() == at::kBFloat16) {  // reduce-scatter + all-gather rings, bf16 on the wire
    if (tensor.numel() == 0) return Work();
    const int64_t chunk = (tensor.numel() + size - 1) / size;
    const int64_t sent = ring_reduce_scatter_bytes(size, chunk, at::kBFloat16) + (size - 1) * chunk * 2;
    const int64_t seq = impl_->arrive("all_reduce", nbytes(tensor), sent);
    const int tag = kRingTagBase + static_cast<int>(seq % (1 << 24));
    auto pg = impl_->pg;
    const int rank = impl_->rank;
    at::Tensor flat = tensor.reshape({-1});
    auto future = impl_->exec().submit([pg, rank, size, flat, chunk, op, tag] {
      at::NoGradGuard no_grad;
      const bool padded = chunk * size != flat.numel();
      at::Tensor buf = padded ? at::zeros({chunk * size}, flat.options()) : flat;
      if (padded) buf.narrow(0, 0, flat.numel()).copy_(flat);
      ring_reduce_scatter(*pg, rank, size, buf, buf.narrow(0, rank * chunk, chunk), op, tag);
      ring_all_gather(*pg, rank, size, chunks_of(buf, size, chunk), tag + kRingAllGatherTagOffset);
      if (padded) flat.copy_(buf.narrow(0, 0, flat.numel()));
    });
    return finish(make_work(future, nullptr, impl_, "all_reduce", seq), async);
  }
  const int64_t seq = impl_->arrive("all_reduce", nbytes(tensor), 2 * (size - 1) * nbytes(tensor) / size);
  at::Tensor buf = reducible(tensor, "all_reduce");
  std::vector<at::Tensor> v{buf};
  c10d::AllreduceOptions o;
  o.reduceOp = to_c10d(op);
  auto work = impl_->pg->allreduce(v, o);
  auto then = [tensor, buf, op, size]() mutable {
    if (op == ReduceOp::kAvg) buf.div_(size);
    if (!buf.is_same(tensor)) tensor.copy_(buf);
  };
  return finish(make_work(std::move(work), std::move(then), impl_, "all_reduce", seq), async);
}

Work Communicator::broadcast(const at::Tensor& tensor, int root, bool async) {
  check_tensor(tensor, "broadcast");
  TORCH_CHECK(root >= 0 && root < impl_->size, "comm: broadcast: root ", root, " is not a rank of ", impl_->name);
  if (!impl_->pg) return Work();
  const int64_t seq = impl_->arrive("broadcast", nbytes(tensor), (impl_->size - 1) * nbytes(tensor) / impl_->size);
  std::vector<at::Tensor> v{movable(tensor)};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  o.rootTensor = 0;
  return finish(make_work(impl_->pg->broadcast(v, o), nullptr, impl_, "broadcast", seq), async);
}

Work Communicator::all_gather(const at::Tensor& input, const at::Tensor& output, bool async) {
  check_tensor(input, "all_gather");
  check_tensor(output, "all_gather");
  const int64_t n = input.numel();
  TORCH_CHECK(output.numel() == n * impl_->size && output.scalar_type() == input.scalar_type(),
              "comm: all_gather: output must have ", impl_->size, " x ", n, " elements of ", input.scalar_type(),
              ", got ", output.numel(), " of ", output.scalar_type());
  std::vector<at::Tensor> outputs;
  const at::Tensor flat = output.reshape({-1});
  for (int r = 0; r < impl_->size; ++r) outputs.push_back(flat.narrow(0, r * n, n));
  return all_gather(input, outputs, async);
}

Work Communicator::all_gather(const at::Tensor& input, const std::vector<at::Tensor>& outputs, bool async) {
  check_tensor(input, "all_gather");
  TORCH_CHECK(static_cast<int>(outputs.size()) == impl_->size, "comm: all_gather: ", outputs.size(),
              " outputs for a group of ", impl_->size);
  for (const auto& o : outputs) {
    check_tensor(o, "all_gather");
    TORCH_CHECK(o.numel() == input.numel() && o.scalar_type() == input.scalar_type(), "comm: all_gather: each ",
                "output must have ", input.numel(), " elements of ", input.scalar_type(), ", got ", o.numel(), " of ",
                o.scalar_type());
  }
  if (!impl_->pg) {
    outputs[0].reshape({-1}).copy_(input.reshape({-1}));
    return Work();
  }
  if (input.numel() == 0) return Work();
  const int64_t seq = impl_->arrive("all_gather", nbytes(input), (impl_->size - 1) * nbytes(input));
  const int tag = kRingTagBase + static_cast<int>(seq % (1 << 24));
  auto pg = impl_->pg;
  const int rank = impl_->rank, size = impl_->size;
  std::vector<at::Tensor> chunks;
  for (const auto& o : outputs) chunks.push_back(o.reshape({-1}));
  at::Tensor in = input.reshape({-1});
  auto future = impl_->exec().submit([pg, rank, size, in, chunks, tag] {
    at::NoGradGuard no_grad;  // the executor thread's grad mode is on; outputs may be views made under no_grad
    if (chunks[rank].data_ptr() != in.data_ptr()) chunks[rank].copy_(in);
    ring_all_gather(*pg, rank, size, chunks, tag);
  });
  return finish(make_work(future, nullptr, impl_, "all_gather", seq), async);
}

Work Communicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op, bool async) {
  check_tensor(input, "reduce_scatter");
  check_tensor(output, "reduce_scatter");
  check_avg(op, input, "reduce_scatter");
  const int size = impl_->size;
  TORCH_CHECK(input.numel() % size == 0 && output.numel() == input.numel() / size &&
                  output.scalar_type() == input.scalar_type(),
              "comm: reduce_scatter: input (", input.numel(), " elements) must split into ", size,
              " slices of the output's size (", output.numel(), ") and dtype");
  if (!impl_->pg) {
    output.reshape({-1}).copy_(input.reshape({-1}));
    return Work();
  }
  const int64_t seq = impl_->arrive("reduce_scatter", nbytes(input),
                                    ring_reduce_scatter_bytes(size, input.numel() / size, input.scalar_type()));
  const int tag = kRingTagBase + static_cast<int>(seq % (1 << 24));
  check_reducible(input, "reduce_scatter");
  at::Tensor in = input.reshape({-1}), out = output.reshape({-1});
  auto pg = impl_->pg;
  const int rank = impl_->rank;
  auto future = impl_->exec().submit([pg, rank, size, in, out, op, tag] {
    at::NoGradGuard no_grad;
    ring_reduce_scatter(*pg, rank, size, in, out, op, tag);
  });
  return finish(make_work(future, nullptr, impl_, "reduce_scatter", seq), async);
}

Work Communicator::send(const at::Tensor& tensor, int dst, int tag, bool async) {
  check_tensor(tensor, "send");
  TORCH_CHECK(dst >= 0 && dst < impl_->size && dst != impl_->rank, "comm: send: bad destination rank ", dst);
  TORCH_CHECK(tag >= 0 && tag < kRingTagBase, "comm: send: tag must be in [0, 2^24), got ", tag);
  impl_->count_p2p(nbytes(tensor), /*sent=*/true);
  std::vector<at::Tensor> v{movable(tensor)};
  const std::string op = "send to rank " + std::to_string(impl_->global_ranks[dst]);
  return finish(make_work(impl_->pg->send(v, dst, tag), nullptr, impl_, op, impl_->seq.load()), async);
}

Work Communicator::recv(const at::Tensor& tensor, int src, int tag, bool async) {
  check_tensor(tensor, "recv");
  TORCH_CHECK(src >= 0 && src < impl_->size && src != impl_->rank, "comm: recv: bad source rank ", src);
  TORCH_CHECK(tag >= 0 && tag < kRingTagBase, "comm: recv: tag must be in [0, 2^24), got ", tag);
  impl_->count_p2p(nbytes(tensor), /*sent=*/false);
  std::vector<at::Tensor> v{movable(tensor)};
  const std::string op = "recv from rank " + std::to_string(impl_->global_ranks[src]);
  return finish(make_work(impl_->pg->recv(v, src, tag), nullptr, impl_, op, impl_->seq.load()), async);
}

void Communicator::barrier() {
  if (!impl_->pg) return;
  const int64_t seq = impl_->arrive("barrier", 0, 0);
  finish(make_work(impl_->pg->barrier(c10d::BarrierOptions()), nullptr, impl_, "barrier", seq), false);
}

double all_reduce_sum(Communicator& comm, double value) {
  if (!comm.distributed()) return value;
  auto t = at::full({1}, value, at::kDouble);
  comm.all_reduce(t, ReduceOp::kSum);
  return t.item<double>();
}

std::string broadcast_string(Communicator& comm, const std::string& value, int root) {
  if (!comm.distributed()) return value;
  at::Tensor n = at::full({1}, static_cast<int64_t>(value.size()), at::kLong);
  comm.broadcast(n, root);
  at::Tensor bytes = at::empty({n.item<int64_t>()}, at::kByte);
  if (comm.rank() == root) std::copy(value.begin(), value.end(), bytes.data_ptr<uint8_t>());
  if (bytes.numel() > 0) comm.broadcast(bytes, root);
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), bytes.numel());
}

}  // namespace xtrain::comm
