// What a federated run prints and writes: a start line, one line per round (clients, validation
// loss and accuracy, bytes up and down), a summary; with an output folder, config.json (resolved),
// metrics.jsonl (one JSON object per round) and summary.json (federated.cpp adds model.safetensors,
// the final global weights). Internal to federated/.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "xtrain/federated/federated.h"
#include "xtrain/run/setup.h"

namespace xtrain::federated {

class RunOutput {
 public:
  RunOutput(const FederatedOptions& options, const Setup& s, const std::vector<int64_t>& client_sizes, int64_t params);
  void round(const RoundReport& r);
  void finish(const std::vector<RoundReport>& rounds);

 private:
  const FederatedOptions& o_;
  std::string dir_;
  std::ofstream metrics_;
  bool classify_ = false;
  int64_t params_ = 0;
};

// "12.3 MB"
std::string format_bytes(int64_t bytes);

}  // namespace xtrain::federated
