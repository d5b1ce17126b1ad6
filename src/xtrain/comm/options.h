// xtrain's `comm` keys (DeepSpeed has none: its timeout is a launcher argument).
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::comm {

struct CommOptions {
  std::string backend = "auto";  // auto | gloo | nccl | mpi
  double timeout_seconds = 300;
  template <class V>
  void visit(V& v) {
    v.choice("backend", backend, {"auto", "gloo", "nccl", "mpi"}, "collective backend (auto: nccl on CUDA, else gloo)");
    v("timeout_seconds", timeout_seconds, "a collective or rendezvous waiting longer fails, naming the missing ranks");
  }
};

}  // namespace xtrain::comm
