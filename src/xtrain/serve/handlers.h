// The bodies of /v1/completions and /v1/classify, apart from HTTP (server.cpp adapts a Reply to
// cpp-httplib, so that only one file of the area includes it). A streaming Reply hands out its
// server-sent events one write at a time while the scheduler produces tokens.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "xtrain/serve/metrics.h"
#include "xtrain/serve/scheduler.h"
#include "xtrain/serve/served_model.h"

namespace xtrain::serve {

struct Reply {
  int status = 200;
  std::string body;
  int retry_after = 0;  // seconds (503)
  enum StreamState { kMore, kDone, kFailed };
  // Set for a stream: writes what is ready through `write` (false: the client is gone).
  std::function<StreamState(const std::function<bool(const std::string&)>& write)> stream;
};

struct HandlerContext {
  const ServedModel& model;
  Scheduler* scheduler;    // lm only
  std::mutex& classify_mu; // one classifier forward at a time
  std::atomic<uint64_t>& next_id;
  std::function<void(const std::string&)> warn;  // the log
};

Reply complete(const HandlerContext& ctx, const std::string& body);
Reply classify(const HandlerContext& ctx, const std::string& body);

}  // namespace xtrain::serve
