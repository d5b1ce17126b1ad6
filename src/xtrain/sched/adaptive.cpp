// The Adaptive plateau schedule (see adaptive.h). Its state is a handful of numbers and the list of
// cuts; state_json writes them with nlohmann-json, whose doubles round-trip exactly.
#include "xtrain/sched/adaptive.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "xtrain/base/error.h"

namespace xtrain::sched {

AdaptiveSchedule::AdaptiveSchedule(const AdaptiveParams& params, double peak_lr)
    : p_(params), peak_lr_(peak_lr), lr_(peak_lr), patience_(params.patience) {}

double AdaptiveSchedule::lr_after(int64_t n) const {
  // Step n + 1 uses lr_after(n).
  if (n + 1 < p_.warmup_num_steps) {
    return peak_lr_ * static_cast<double>(n + 1) / static_cast<double>(p_.warmup_num_steps);
  }
  double lr = peak_lr_;
  for (const auto& [step, value] : cuts_) {
    if (step <= n) lr = value;
  }
  return lr;
}

void AdaptiveSchedule::observe(int64_t n, double loss) {
  if (n <= last_step_ || !std::isfinite(loss)) return;
  last_step_ = n;
  ema_ = p_.smoothing * ema_ + (1 - p_.smoothing) * loss;
  ++count_;
  smoothed_ = ema_ / (1 - std::pow(p_.smoothing, static_cast<double>(count_)));
  if (n < p_.warmup_num_steps) return;
  if (!tracking_) {
    tracking_ = true;
    best_ = smoothed_;
    pending_.push_back({n, "warmup_done", lr_, smoothed_});
    return;
  }
  decide(n);
}

void AdaptiveSchedule::decide(int64_t n) {
  const bool improved = best_ - smoothed_ > p_.threshold * std::abs(best_);
  if (improved) best_ = smoothed_;
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    wait_ = 0;
    return;
  }
  wait_ = improved ? 0 : wait_ + 1;
  if (wait_ >= patience_ && !at_floor_) cut(n);
}

void AdaptiveSchedule::cut(int64_t n) {
  lr_ = std::max(p_.min_lr, lr_ * p_.factor);
  cuts_.emplace_back(n, lr_);
  pending_.push_back({n, "cut", lr_, smoothed_});
  patience_ = std::llround(static_cast<double>(patience_) * p_.patience_growth);
  pending_.push_back({n, "patience:" + std::to_string(patience_), lr_, smoothed_});
  best_ = smoothed_;
  wait_ = 0;
  cooldown_left_ = p_.cooldown;
  if (lr_ <= p_.min_lr) {
    at_floor_ = true;
    pending_.push_back({n, "floor", lr_, smoothed_});
  }
}

std::vector<Decision> AdaptiveSchedule::take_decisions() {
  std::vector<Decision> out;
  out.swap(pending_);
  return out;
}

std::string AdaptiveSchedule::state_json() const {
  nlohmann::json j = {{"version", 1},          {"lr", lr_},          {"ema", ema_},
                      {"count", count_},       {"smoothed", smoothed_}, {"tracking", tracking_},
                      {"best", best_},         {"wait", wait_},      {"cooldown_left", cooldown_left_},
                      {"patience", patience_}, {"at_floor", at_floor_}, {"last_step", last_step_},
                      {"cuts", cuts_}};
  return j.dump();
}

void AdaptiveSchedule::load_state_json(const std::string& state) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(state);
    XTRAIN_USAGE_CHECK(j.at("version").get<int>() == 1, "sched: Adaptive state has version ", j.at("version"),
                       ", expected 1 (checkpoint)");
    lr_ = j.at("lr").get<double>();
    ema_ = j.at("ema").get<double>();
    count_ = j.at("count").get<int64_t>();
    smoothed_ = j.at("smoothed").get<double>();
    tracking_ = j.at("tracking").get<bool>();
    best_ = j.at("best").get<double>();
    wait_ = j.at("wait").get<int64_t>();
    cooldown_left_ = j.at("cooldown_left").get<int64_t>();
    patience_ = j.at("patience").get<int64_t>();
    at_floor_ = j.at("at_floor").get<bool>();
    last_step_ = j.at("last_step").get<int64_t>();
    cuts_ = j.at("cuts").get<std::vector<std::pair<int64_t, double>>>();
  } catch (const nlohmann::json::exception& e) {
    XTRAIN_USAGE_ERROR("sched: cannot read the Adaptive schedule state from the checkpoint: ", e.what());
  }
  pending_.clear();
}

}  // namespace xtrain::sched
