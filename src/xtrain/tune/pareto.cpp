// Non-dominated sorting by pairwise comparison (O(n²): a study has tens to hundreds of trials).
#include "xtrain/tune/pareto.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "xtrain/base/file_io.h"
#include "xtrain/base/log.h"
#include "xtrain/monitor/plot/plot.h"
#include "xtrain/monitor/progress.h"
#include "xtrain/tune/report.h"

namespace xtrain::tune {
namespace fs = std::filesystem;
namespace {

bool dominates(const std::pair<double, double>& a, const std::pair<double, double>& b) {
  return a.first <= b.first && a.second <= b.second && (a.first < b.first || a.second < b.second);
}

bool usable(const Trial& t) {
  return t.state == TrialState::kComplete && t.value && std::isfinite(*t.value) && t.objective2 &&
         std::isfinite(*t.objective2);
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.5g", v);
  return buf;
}

// Every trial as a small cross (two strokes separated by NaN gaps), the front as a staircase.
void plot_front(const std::string& path, const std::vector<Trial>& trials, const std::vector<size_t>& front,
                const std::string& metric, const std::string& objective2) {
  std::vector<double> xs, ys;
  for (const auto& t : trials) {
    if (!usable(t)) continue;
    xs.push_back(*t.objective2);
    ys.push_back(*t.value);
  }
  if (xs.empty()) return;
  const auto [xmin, xmax] = std::minmax_element(xs.begin(), xs.end());
  const auto [ymin, ymax] = std::minmax_element(ys.begin(), ys.end());
  monitor::PlotOptions po;
  po.log_x = *xmin > 0 && *xmax / *xmin > 20;
  po.title = "xtrain tune: " + metric + " against " + objective2 + " (Pareto front)";
  po.x_label = objective2;
  po.y_label = metric;
  const double span_x = po.log_x ? std::log(*xmax / *xmin) : *xmax - *xmin, span_y = *ymax - *ymin;
  const double dx = 0.012 * (span_x > 0 ? span_x : 1.0), dy = 0.02 * (span_y > 0 ? span_y : 1.0);
  monitor::Series all{"trials", {}, {}}, line{"Pareto front", {}, {}};
  for (size_t i = 0; i < xs.size(); ++i) {
    const double left = po.log_x ? xs[i] * std::exp(-dx) : xs[i] - dx,
                 right = po.log_x ? xs[i] * std::exp(dx) : xs[i] + dx;
    for (const auto& [x, y] : std::vector<std::pair<double, double>>{{left, ys[i] - dy},
                                                                     {right, ys[i] + dy},
                                                                     {NAN, NAN},
                                                                     {left, ys[i] + dy},
                                                                     {right, ys[i] - dy},
                                                                     {NAN, NAN}}) {
      all.x.push_back(x);
      all.y.push_back(y);
    }
  }
  for (size_t k = 0; k < front.size(); ++k) {
    const auto& t = trials[front[k]];
    if (k > 0) {  // step after: the better-metric point is reached only at its own cost
      line.x.push_back(*t.objective2);
      line.y.push_back(line.y.back());
    }
    line.x.push_back(*t.objective2);
    line.y.push_back(*t.value);
  }
  monitor::write_line_plot_png(path, {all, line}, po);
}

}  // namespace

std::vector<size_t> pareto_front(const std::vector<std::pair<double, double>>& points) {
  std::vector<size_t> front;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!std::isfinite(points[i].first) || !std::isfinite(points[i].second)) continue;
    bool dominated = false;
    for (size_t j = 0; j < points.size() && !dominated; ++j)
      dominated = j != i && std::isfinite(points[j].first) && std::isfinite(points[j].second) &&
                  dominates(points[j], points[i]);
    if (!dominated) front.push_back(i);
  }
  std::stable_sort(front.begin(), front.end(), [&](size_t a, size_t b) {
    return points[a].second != points[b].second ? points[a].second < points[b].second
                                                : points[a].first < points[b].first;
  });
  return front;
}

std::vector<size_t> pareto_trials(const std::vector<Trial>& trials, double sign) {
  std::vector<std::pair<double, double>> points;
  for (const auto& t : trials) points.emplace_back(usable(t) ? sign * *t.value : NAN, usable(t) ? *t.objective2 : NAN);
  return pareto_front(points);
}

std::string pareto_table(const std::vector<Trial>& trials, const std::vector<size_t>& front, const SearchSpace& space,
                         const std::string& metric, const std::string& objective2) {
  TrialTable table(space, metric);
  const size_t wm = std::max<size_t>(11, metric.size() + 1), wo = std::max<size_t>(12, objective2.size() + 1);
  std::string out =
      pad("trial", 6) + pad(metric, wm) + pad(objective2, wo) + pad("steps", 7) + pad("time", 8) + "parameters";
  for (size_t i : front) {
    const auto& t = trials[i];
    out += "\n" + pad(trial_name(t.id), 6) + pad(number(*t.value), wm) + pad(number(*t.objective2), wo) +
           pad(std::to_string(t.last_step()), 7) + pad(monitor::format_duration(t.seconds()), 8) +
           table.describe(t.params);
  }
  return out;
}

std::vector<std::string> write_pareto_outputs(const std::string& dir, const SearchSpace& space,
                                              const std::vector<Trial>& trials, double sign, const std::string& metric,
                                              const std::string& objective2) {
  const auto front = pareto_trials(trials, sign);
  nlohmann::json j = {{"metric", metric}, {"objective2", objective2}, {"front", nlohmann::json::array()}};
  for (size_t i : front) {
    const auto& t = trials[i];
    j["front"].push_back({{"trial", t.id},
                          {"value", *t.value},
                          {"objective2", *t.objective2},
                          {"steps", t.last_step()},
                          {"params", t.params},
                          {"overrides", space.overrides(t.params)}});
  }
  const auto json_path = (fs::path(dir) / "pareto.json").string(), png_path = (fs::path(dir) / "pareto.png").string();
  write_file_atomic(json_path, j.dump(2) + "\n");
  std::vector<std::string> written = {json_path};
  try {
    plot_front(png_path, trials, front, metric, objective2);
    if (fs::exists(png_path)) written.push_back(png_path);
  } catch (const std::exception& e) {
    log::warn("tune: could not write ", png_path, ": ", e.what());
  }
  return written;
}

}  // namespace xtrain::tune
