// The four conjugate autograd functions of Megatron's tensor parallelism (mappings.py), over one
// tensor-parallel Communicator: copy (forward identity, backward all-reduce) is the conjugate of
// reduce (forward all-reduce, backward identity); scatter (forward keep this rank's slice of the
// last dimension, backward all-gather) is the conjugate of gather. A group of size 1 makes all four
// the identity. Every rank of the group must call them in the same order (they are collectives).
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>

namespace xtrain::comm {
class Communicator;
}

namespace xtrain::parallel::tensor {

using CommPtr = std::shared_ptr<comm::Communicator>;

at::Tensor copy_to_tensor_parallel(const at::Tensor& x, const CommPtr& tp);      // f
at::Tensor reduce_from_tensor_parallel(const at::Tensor& x, const CommPtr& tp);  // g
// [..., N] -> [..., N / tp] (this rank's contiguous slice); UsageError when tp does not divide N.
at::Tensor scatter_to_tensor_parallel(const at::Tensor& x, const CommPtr& tp);
// [..., n] on each rank -> [..., tp · n], the ranks' slices in rank order.
at::Tensor gather_from_tensor_parallel(const at::Tensor& x, const CommPtr& tp);

}  // namespace xtrain::parallel::tensor
