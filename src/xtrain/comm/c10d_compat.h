// The c10d API we use, in one place, for LibTorch 1.13 (Debian, CPU) and 2.x (GPU machines).
// Included only by comm/*.cpp: our headers never see c10d types. In 1.13 ProcessGroupGloo is a
// ProcessGroup; in 2.x a Backend — the calls below are spelled the same in both.
#pragma once
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "xtrain/comm/interface.h"

namespace xtrain::comm::compat {

using Store = c10d::Store;
using StorePtr = c10::intrusive_ptr<c10d::Store>;
using GlooPtr = c10::intrusive_ptr<c10d::ProcessGroupGloo>;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

inline std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
inline std::string text(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

// Rank 0 hosts the store; the others connect (retrying until `timeout`). We do our own
// rendezvous on top (to name missing ranks), so the server does not wait for workers.
inline StorePtr make_tcp_store(const std::string& host, int port, bool is_server, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = is_server;
  o.waitWorkers = false;
  o.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(host, o);
}

inline StorePtr prefixed(const std::string& prefix, const StorePtr& store) {
  return c10::make_intrusive<c10d::PrefixStore>(prefix, store);
}

// Gloo over TCP on the devices interface.h chose (GLOO_SOCKET_IFNAME, loopback, or the address
// of the route to MASTER_ADDR).
inline GlooPtr make_gloo(const StorePtr& store, int rank, int size, std::chrono::milliseconds timeout,
                         const std::vector<GlooDevice>& devices) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  for (const auto& d : devices) {
    options->devices.push_back(d.by_interface ? c10d::ProcessGroupGloo::createDeviceForInterface(d.value)
                                              : c10d::ProcessGroupGloo::createDeviceForHostname(d.value));
  }
  options->threads = 2;  // two buckets in flight: one reducing while the next is sent
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

inline c10d::ReduceOp sum_op() { return c10d::ReduceOp(c10d::ReduceOp::SUM); }
inline c10d::ReduceOp max_op() { return c10d::ReduceOp(c10d::ReduceOp::MAX); }
inline c10d::ReduceOp min_op() { return c10d::ReduceOp(c10d::ReduceOp::MIN); }

}  // namespace xtrain::comm::compat
