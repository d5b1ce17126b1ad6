#include "xtrain/federated/output.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/base/log.h"

namespace xtrain::federated {
namespace fs = std::filesystem;

std::string format_bytes(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  }
  return buf;
}

namespace {

std::string fmt(double v, int precision = 4) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

nlohmann::json nullable(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string describe_sizes(std::vector<int64_t> sizes) {
  std::sort(sizes.begin(), sizes.end());
  const int64_t empty = std::count(sizes.begin(), sizes.end(), int64_t(0));
  return c10::str("samples per client min ", sizes.front(), " median ", sizes[sizes.size() / 2], " max ", sizes.back(),
                  empty > 0 ? c10::str(" (", empty, " empty: never sampled)") : "");
}

}  // namespace

RunOutput::RunOutput(const FederatedOptions& o, const Setup& s, const std::vector<int64_t>& client_sizes, int64_t params)
    : o_(o), dir_(o.output), classify_(s.task->name() == std::string("classify")), params_(params) {
  const auto& c = s.config;
  const auto m = static_cast<int64_t>(std::ceil(o.fraction * static_cast<double>(o.clients) - 1e-9));
  if (!o.quiet) {
    log::info("federated: ", o.clients, " clients, split ", o.split.describe(), "; ", describe_sizes(client_sizes));
    log::info("federated: ", o.rounds, " rounds of ", m, " clients x ", o.local_steps, " local steps (", c.model.type,
              ", ", params, " parameters, optimizer ", c.optimizer.type, " lr ", c.optimizer.lr(), ", batch ",
              *c.engine.train_batch_size, ")", o.prox_mu > 0 ? c10::str(", FedProx mu ", o.prox_mu) : ", FedAvg",
              o.secure_agg ? ", secure aggregation" : "", o.dropout > 0 ? c10::str(", dropout ", o.dropout) : "",
              o.privacy.enabled() ? c10::str(", DP clip ", o.privacy.clip, " noise ", o.privacy.noise) : "");
  }
  if (dir_.empty()) return;
  fs::create_directories(dir_);
  write_file_atomic((fs::path(dir_) / "config.json").string(), config::to_json(c) + "\n");
  metrics_.open(fs::path(dir_) / "metrics.jsonl");
  XTRAIN_USAGE_CHECK(metrics_.good(), "--output ", dir_, ": cannot write metrics.jsonl there");
}

void RunOutput::round(const RoundReport& r) {
  if (!o_.quiet) {
    log::info("round ", r.round, "/", o_.rounds, " | clients ", r.sampled - r.dropped, "/", r.sampled,
              r.dropped ? c10::str(" (", r.dropped, " dropped)") : "", " | train loss ", fmt(r.train_loss),
              " | val loss ", fmt(r.eval.loss), classify_ ? c10::str(" acc ", fmt(100 * r.eval.accuracy, 4), "%") : "",
              " | up ", format_bytes(r.bytes_up), " down ", format_bytes(r.bytes_down),
              r.epsilon >= 0 ? c10::str(" | eps ", fmt(r.epsilon, 3)) : "", " | ", fmt(r.seconds, 3), "s");
  }
  if (!metrics_.is_open()) return;
  nlohmann::json j = {{"round", r.round},           {"clients", r.sampled - r.dropped}, {"sampled", r.sampled},
                      {"dropped", r.dropped},       {"train_loss", nullable(r.train_loss)},
                      {"val_loss", nullable(r.eval.loss)}, {"bytes_up", r.bytes_up}, {"bytes_down", r.bytes_down},
                      {"seconds", r.seconds}};
  if (classify_) j["val_accuracy"] = r.eval.accuracy;
  if (r.epsilon >= 0) j["epsilon"] = r.epsilon;
  if (o_.secure_agg) j["max_mask_error"] = r.max_mask_error;
  metrics_ << j.dump() << "\n" << std::flush;
}

void RunOutput::finish(const std::vector<RoundReport>& rounds) {
  int64_t up = 0, down = 0;
  double seconds = 0;
  for (const auto& r : rounds) {
    up += r.bytes_up;
    down += r.bytes_down;
    seconds += r.seconds;
  }
  const RoundReport& last = rounds.back();
  if (!o_.quiet) {
    log::info("done: ", rounds.size(), " rounds in ", fmt(seconds, 3), "s | val loss ", fmt(last.eval.loss),
              classify_ ? c10::str(" acc ", fmt(100 * last.eval.accuracy, 4), "%") : "", " | sent up ",
              format_bytes(up), " down ", format_bytes(down),
              last.epsilon >= 0 ? c10::str(" | (", fmt(last.epsilon, 3), ", ", o_.privacy.delta,
                                           ")-DP per client, RDP of the Gaussian mechanism, no sampling amplification")
                                : "");
  }
  if (dir_.empty()) return;
  nlohmann::json s = {{"rounds", rounds.size()}, {"clients", o_.clients},    {"fraction", o_.fraction},
                      {"local_steps", o_.local_steps}, {"split", o_.split.describe()}, {"prox_mu", o_.prox_mu},
                      {"secure_agg", o_.secure_agg}, {"dropout", o_.dropout}, {"parameters", params_},
                      {"val_loss", nullable(last.eval.loss)}, {"bytes_up", up}, {"bytes_down", down}, {"seconds", seconds}};
  if (classify_) s["val_accuracy"] = last.eval.accuracy;
  if (last.epsilon >= 0) s["epsilon"] = last.epsilon, s["delta"] = o_.privacy.delta;
  write_file_atomic((fs::path(dir_) / "summary.json").string(), s.dump(2) + "\n");
}

}  // namespace xtrain::federated
