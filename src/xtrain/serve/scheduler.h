// Continuous batching: requests wait in a bounded queue; one scheduler thread runs every decoding
// step for all active sequences together (models::IncrementalDecoder::step), a new sequence joins
// after its prefill, and a sequence leaves when it has max_tokens, its callback asks to stop (a
// stop string) or it samples the end-of-text token. Admission is bounded by max_batch and by a token
// budget (Σ prompt + max_tokens of the active sequences; one sequence always fits when alone).
// Design choice: callbacks run on the scheduler thread and must be quick (they hand text to the
// HTTP thread that waits for it), so one slow client never stalls a step.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "xtrain/models/kv_cache.h"
#include "xtrain/serve/metrics.h"
#include "xtrain/serve/options.h"

namespace xtrain::serve {

struct Sequence {
  std::vector<int64_t> prompt;  // non-empty, at most the context
  int64_t max_tokens = 16;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  std::optional<int64_t> eos;  // the tokenizer's end-of-text id: ends the sequence, not emitted
  // Each new token; false finishes the sequence ("stop": a stop string, or the client went away).
  std::function<bool(int64_t token)> on_token;
  // Once, at the end: "length", "stop", or "error: <message>".
  std::function<void(const std::string& finish_reason)> on_done;
};

class Scheduler {
 public:
  Scheduler(std::shared_ptr<models::IncrementalDecoder> decoder, const ServeOptions& options, Metrics& metrics);
  ~Scheduler();  // drain()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues the sequence; false when the queue is full or the scheduler is draining.
  bool submit(std::shared_ptr<Sequence> seq);
  // Refuses new sequences, finishes every queued and active one, stops the thread.
  void drain();
  int64_t waiting() const;

 private:
  struct Active;
  void loop();
  bool admit(std::vector<std::shared_ptr<Sequence>>& out);
  void emit(Active& a, int64_t token);

  std::shared_ptr<models::IncrementalDecoder> decoder_;
  ServeOptions options_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Sequence>> queue_;
  std::vector<std::unique_ptr<Active>> active_;  // scheduler thread only
  int64_t active_budget_ = 0;                    // guarded by mu_
  int64_t active_count_ = 0;                     // guarded by mu_
  bool draining_ = false;
  std::thread thread_;
};

}  // namespace xtrain::serve
