// `xtrain serve`'s settings (command-line flags, not a config file: a server of one trained run).
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;     // 0: any free port (printed)
  std::string token;   // "" = none; required unless host is loopback (the dashboard's rule)
  int64_t max_batch = 16;      // sequences decoded together in one step
  int64_t max_queue = 64;      // requests waiting for a slot; one more answers 503 + Retry-After
  int64_t token_budget = 8192; // Σ (prompt + max_tokens) over the sequences being decoded
  bool batching = true;        // false: one sequence at a time (the baseline of bench/serve_load.sh)
};

}  // namespace xtrain::serve
