#include "xtrain/zero/grad_reduce.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cctype>

#include "xtrain/base/error.h"

namespace xtrain::zero {

UnitReduction::UnitReduction(comm::Communicator& dp, const at::Tensor& input, const UnitReduceOptions& o)
    : dtype_(input.scalar_type()), cast_(o.casts(input.scalar_type())) {
  const int64_t shard = input.numel() / dp.size();
  buffer_ = cast_ ? input.to(o.wire) : input;
  const double before = cast_ && o.reduce_scatter ? o.pre * o.post : o.pre;
  after_ = cast_ && !o.reduce_scatter ? o.post : 1.0;
  if (before != 1.0) buffer_.mul_(before);
  if (o.reduce_scatter) {
    out_ = at::empty({shard}, buffer_.options());
    work_ = dp.reduce_scatter(buffer_, out_, comm::ReduceOp::kSum, /*async=*/true);
  } else {
    out_ = buffer_.narrow(0, dp.rank() * shard, shard);
    work_ = dp.all_reduce(buffer_, comm::ReduceOp::kSum, /*async=*/true);
  }
}

at::Tensor UnitReduction::wait() {
  work_.wait();
  if (!cast_) return out_;
  if (after_ != 1.0) out_.mul_(after_);
  return out_.to(dtype_);
}

namespace {

// Reduce-scatter through the wire dtype, a piece of every slice at a time.
void reduce_scatter_cast(comm::Communicator& dp, const at::Tensor& input, const UnitReduceOptions& o, int64_t piece) {
  const int64_t world = dp.size(), shard = input.numel() / world;
  for (int64_t off = 0; off < shard; off += piece) {
    const int64_t len = std::min(piece, shard - off);
    at::Tensor wire = at::empty({world * len}, input.options().dtype(o.wire));
    for (int64_t r = 0; r < world; ++r) wire.narrow(0, r * len, len).copy_(input.narrow(0, r * shard + off, len));
    if (o.pre * o.post != 1.0) wire.mul_(o.pre * o.post);
    at::Tensor out = at::empty({len}, wire.options());
    dp.reduce_scatter(wire, out, comm::ReduceOp::kSum);
    input.narrow(0, dp.rank() * shard + off, len).copy_(out);
  }
}

}  // namespace

void reduce_in_place(comm::Communicator& dp, const at::Tensor& input, const UnitReduceOptions& o, int64_t piece) {
  const int64_t world = dp.size(), shard = input.numel() / world;
  if (!o.casts(input.scalar_type())) {
    if (o.pre != 1.0) input.mul_(o.pre);
    if (o.reduce_scatter) {  // the ring reads slice r of the input only in its last step: the output may alias it
      dp.reduce_scatter(input, input.narrow(0, dp.rank() * shard, shard), comm::ReduceOp::kSum);
    } else {
      dp.all_reduce(input, comm::ReduceOp::kSum);
    }
    return;
  }
  if (o.reduce_scatter) {
    reduce_scatter_cast(dp, input, o, piece);
    return;
  }
  const int64_t step = piece * world;
  for (int64_t off = 0; off < input.numel(); off += step) {
    at::Tensor part = input.narrow(0, off, std::min(step, input.numel() - off));
    at::Tensor wire = part.to(o.wire);
    if (o.pre != 1.0) wire.mul_(o.pre);
    dp.all_reduce(wire, comm::ReduceOp::kSum);
    if (o.post != 1.0) wire.mul_(o.post);
    part.copy_(wire);
  }
}

at::ScalarType communication_dtype(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n.empty()) return at::ScalarType::Undefined;
  if (n == "fp32" || n == "float32" || n == "float") return at::kFloat;
  if (n == "fp16" || n == "float16" || n == "half") return at::kHalf;
  if (n == "bf16" || n == "bfloat16") return at::kBFloat16;
  XTRAIN_USAGE_ERROR("zero: communication_data_type must be fp32, fp16 or bf16, got \"", name,
                     "\" (communication_data_type)");
}

}  // namespace xtrain::zero
