// One file of named tensors in torch.save's zip format (an ordered dict str -> Tensor), so Python's
// torch.load reads our checkpoints and we read torch.save'd dicts. Tensors are saved detached, on
// the CPU and compacted (a view saves its own elements, not its base's whole storage).
#pragma once
#include <string>

#include "xtrain/checkpoint/durable_file.h"
#include "xtrain/checkpoint/store.h"

namespace xtrain::checkpoint {

// Streams the archive through a DurableWriter: hashed while written, fsynced on return.
FileDigest write_tensor_file(const std::string& path, const NamedTensors& tensors);
// Tensors in the order they were written, on the CPU.
NamedTensors read_tensor_file(const std::string& path);

}  // namespace xtrain::checkpoint
