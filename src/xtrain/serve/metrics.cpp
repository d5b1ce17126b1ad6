// Metrics: a mutex around plain counters; the text is written on each scrape.
#include "xtrain/serve/metrics.h"

#include <chrono>
#include <cstdio>

namespace xtrain::serve {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

constexpr double kRateWindow = 10.0;  // seconds behind tokens/s

}  // namespace

void Metrics::Histogram::observe(double v) {
  if (counts.empty()) counts.assign(bounds.size() + 1, 0);
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++n;
}

void Metrics::Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += counts.empty() ? 0 : counts[i];
    const std::string le = i < bounds.size() ? number(bounds[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + number(sum) + "\n" + name + "_count " + std::to_string(n) + "\n";
}

void Metrics::request(const std::string& route, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
  if (status >= 400) ++errors_;
  if (route == "/v1/completions" || route == "/v1/classify") latency_.observe(seconds);
}

void Metrics::step(int64_t batch_size, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  if (batch_size > 0) batch_.observe(static_cast<double>(batch_size)), ++steps_;
  tokens_ += tokens;
  recent_.emplace_back(now_seconds(), tokens);
}

void Metrics::set_queue(int64_t waiting, int64_t active) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_ = waiting, active_ = active;
}

std::string Metrics::prometheus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP xtrain_serve_requests_total HTTP requests by route and status code\n";
  out += "# TYPE xtrain_serve_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += "xtrain_serve_requests_total{route=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  }
  out += "# HELP xtrain_serve_errors_total requests answered with a 4xx or 5xx status\n";
  out += "# TYPE xtrain_serve_errors_total counter\nxtrain_serve_errors_total " + std::to_string(errors_) + "\n";
  latency_.write(out, "xtrain_serve_request_duration_seconds", "time from request to last byte (completions, classify)");
  batch_.write(out, "xtrain_serve_batch_size", "sequences in one decoding step");
  out += "# HELP xtrain_serve_generated_tokens_total tokens generated\n";
  out += "# TYPE xtrain_serve_generated_tokens_total counter\nxtrain_serve_generated_tokens_total " +
         std::to_string(tokens_) + "\n";
  const double now = now_seconds();
  while (!recent_.empty() && recent_.front().first < now - kRateWindow) recent_.pop_front();
  int64_t window_tokens = 0;
  for (const auto& r : recent_) window_tokens += r.second;
  out += "# HELP xtrain_serve_tokens_per_second tokens generated per second over the last 10 s\n";
  out += "# TYPE xtrain_serve_tokens_per_second gauge\nxtrain_serve_tokens_per_second " +
         number(static_cast<double>(window_tokens) / kRateWindow) + "\n";
  out += "# HELP xtrain_serve_queue_length requests waiting for a decoding slot\n";
  out += "# TYPE xtrain_serve_queue_length gauge\nxtrain_serve_queue_length " + std::to_string(waiting_) + "\n";
  out += "# HELP xtrain_serve_active_sequences sequences being decoded\n";
  out += "# TYPE xtrain_serve_active_sequences gauge\nxtrain_serve_active_sequences " + std::to_string(active_) + "\n";
  return out;
}

}  // namespace xtrain::serve
