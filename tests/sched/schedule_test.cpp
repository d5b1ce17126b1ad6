// Schedules: DeepSpeed's five against tests/reference/gen_sched.py (the formulas of
// reference/deepspeed.md §a.3 computed in Python) at every step 0..N, and the assertions of
// DeepSpeed's own tests/unit/runtime/test_lr_schedulers.py. Adaptive: cut steps on scripted loss
// curves against the generator's simulation and a closed form, decisions, state round-trip.
// suggest_lr on synthetic range-test curves.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/sched/lr_finder.h"
#include "xtrain/sched/schedule.h"

namespace xtrain::sched::schedule_test {
namespace {

const std::map<std::string, at::Tensor>& fixture() {
  static const auto f = xtrain::testing::load_tensors("sched.pt");
  return f;
}

SchedulerOptions warmup(const std::string& type, double lo, double hi, int64_t w, const std::string& kind,
                        int64_t total = 0) {
  SchedulerOptions o;
  o.type = type;
  o.warmup = {lo, hi, w, kind, total, -1, type == "WarmupDecayLR"};
  return o;
}

SchedulerOptions cosine(int64_t total, int64_t w, double cos_min, double warmup_min, const std::string& kind) {
  SchedulerOptions o;
  o.type = "WarmupCosineLR";
  o.cosine.total_num_steps = total;
  o.cosine.warmup_num_steps = w;
  o.cosine.cos_min_ratio = cos_min;
  o.cosine.warmup_min_ratio = warmup_min;
  o.cosine.warmup_type = kind;
  return o;
}

SchedulerOptions one_cycle(double lo, double hi, int64_t s1, int64_t s2, double lr_decay, int64_t decay_size,
                           bool mom, double mom_lo, double mom_hi, double mom_decay) {
  SchedulerOptions o;
  o.type = "OneCycle";
  auto& p = o.one_cycle;
  p.cycle_min_lr = lo;
  p.cycle_max_lr = hi;
  p.cycle_first_step_size = s1;
  p.cycle_second_step_size = s2;
  p.decay_lr_rate = lr_decay;
  p.decay_step_size = decay_size;
  p.cycle_momentum = mom;
  p.cycle_min_mom = mom_lo;
  p.cycle_max_mom = mom_hi;
  p.decay_mom_rate = mom_decay;
  return o;
}

SchedulerOptions range_test(double lo, int64_t size, double rate, bool stair) {
  SchedulerOptions o;
  o.type = "LRRangeTest";
  o.range_test = {lo, size, rate, stair, -1};
  return o;
}

struct Config {
  std::string name;
  SchedulerOptions options;
  double base_lr = 0.0;
};

// The same table as CONFIGS in gen_sched.py.
std::vector<Config> configs() {
  auto resume = warmup("WarmupLR", 0.0, 0.01, 15, "linear");
  resume.warmup.last_batch_iteration = 4;
  return {{"warmup_log", warmup("WarmupLR", 1e-4, 1e-3, 10, "log")},
          {"warmup_linear", warmup("WarmupLR", 0.0, 0.01, 15, "linear")},
          {"warmup_w1", warmup("WarmupLR", 0.1, 0.2, 1, "linear")},
          {"decay_log", warmup("WarmupDecayLR", 0.0, 1e-3, 10, "log", 50)},
          {"decay_linear", warmup("WarmupDecayLR", 1e-5, 1e-3, 19, "linear", 40)},
          {"decay_short", warmup("WarmupDecayLR", 0.0, 1e-3, 8, "log", 5)},
          {"cosine_log", cosine(100, 10, 0.1, 0.2, "log"), 0.0015},
          {"cosine_linear", cosine(60, 30, 0.0, 0.0, "linear"), 3e-4},
          {"onecycle", one_cycle(1e-3, 1e-2, 10, -1, 1e-3, 10, true, 0.85, 0.95, 1e-3)},
          {"onecycle_asym", one_cycle(1e-4, 1e-3, 7, 13, 0.0, 0, true, 0.8, 0.9, 0.0)},
          {"onecycle_nomom", one_cycle(0.0, 0.1, 5, -1, 0.5, 3, false, 0.8, 0.9, 0.0)},
          {"lrrt", range_test(1e-3, 10, 1.0, false)},
          {"lrrt_stair", range_test(1e-4, 7, 0.5, true)},
          {"warmup_resume", resume}};
}

TEST(Schedule, EveryStepMatchesTheReferenceFormulas) {
  for (const auto& c : configs()) {
    const auto s = make_schedule(c.options, c.base_lr);
    const auto& expect_lr = fixture().at(c.name + ".lr");
    std::vector<double> lr, b1, b2;
    for (int64_t n = 0; n < expect_lr.numel(); ++n) {
      lr.push_back(s->lr_after(n));
      b1.push_back(s->betas_after(n).first);
      b2.push_back(s->betas_after(n).second);
    }
    // Same float64 formulas; DeepSpeed (and we) multiply by 1/ln(Wn) where the spec divides by
    // ln(Wn): the log warm-ups differ by 1 ulp (measured), everything else is bit-identical.
    xtrain::testing::expect_close(at::tensor(lr, at::kDouble), expect_lr, 1e-15, 0, c.name + " lr");
    if (fixture().count(c.name + ".beta1")) {
      xtrain::testing::expect_close(at::tensor(b1, at::kDouble), fixture().at(c.name + ".beta1"), 1e-15, 0,
                                    c.name + " beta1");
      xtrain::testing::expect_close(at::tensor(b2, at::kDouble), fixture().at(c.name + ".beta2"), 0, 0,
                                    c.name + " beta2");
    }
  }
}

TEST(Schedule, ConstantForNoType) {
  const auto s = make_schedule(SchedulerOptions{}, 3e-4);
  for (int64_t n : {0, 1, 1000}) EXPECT_EQ(s->lr_after(n), 3e-4);
  EXPECT_EQ(s->betas_after(5), std::make_pair(-1.0, -1.0));
  EXPECT_EQ(s->state_json(), "");
}

void expect_strictly(bool increasing, const std::vector<double>& v, const std::string& what) {
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    EXPECT_TRUE(increasing ? v[i] < v[i + 1] : v[i] > v[i + 1]) << what << " at " << i << ": " << v[i] << ", "
                                                                << v[i + 1];
  }
}

std::vector<double> lrs(const Schedule& s, int64_t from, int64_t to) {  // lr_after(from .. to - 1)
  std::vector<double> out;
  for (int64_t n = from; n < to; ++n) out.push_back(s.lr_after(n));
  return out;
}

// DeepSpeed's test_lr_warmup_schedule / test_lr_warmup_decay_schedule: step_lrs[i] = lr_after(i + 1).
TEST(Schedule, DeepSpeedWarmupAssertions) {
  for (int64_t w : {10, 15, 19, 33}) {
    for (const char* kind : {"log", "linear"}) {
      const auto s = make_schedule(warmup("WarmupLR", 0.1, 0.2, w, kind), 0.0);
      EXPECT_EQ(s->lr_after(1), 0.1);
      for (int64_t n = w + 1; n <= 2 * w; ++n) EXPECT_EQ(s->lr_after(n), 0.2) << kind << " W=" << w << " n=" << n;
      const auto d = make_schedule(warmup("WarmupDecayLR", 0.1, 0.2, w, kind, 2 * w), 0.0);
      EXPECT_EQ(d->lr_after(1), 0.1);
      EXPECT_EQ(d->lr_after(w + 1), 0.2);
      expect_strictly(false, lrs(*d, w + 1, 2 * w + 1), "WarmupDecayLR decay");  // DeepSpeed runs 2W steps
    }
  }
}

// DeepSpeed's TestWarmupCosineLR: step_lrs[i] = lr_after(i + 1).
TEST(Schedule, DeepSpeedWarmupCosineAssertions) {
  struct P { int64_t total, w; double cos_min, warmup_min; };
  const double base = 0.0015;
  for (auto p : {P{100, 10, 0.1, 0.2}, P{200, 20, 0.1, 0.2}, P{500, 30, 0.0, 0.2}, P{600, 300, 0.1, 0.0},
                 P{600, 550, 0.0, 0.0}}) {
    const auto s = make_schedule(cosine(p.total, p.w, p.cos_min, p.warmup_min, "log"), base);
    EXPECT_NEAR(s->lr_after(1), base * p.warmup_min, 1e-7);
    EXPECT_NEAR(s->lr_after(p.w), base, 1e-7);
    EXPECT_NEAR(s->lr_after(p.total), base * p.cos_min, 1e-7);
    expect_strictly(true, lrs(*s, 1, p.w + 1), "cosine warm-up");
    expect_strictly(false, lrs(*s, p.w + 1, p.total + 1), "cosine decay");
    EXPECT_EQ(s->lr_after(0), 0.0);  // DeepSpeed writes 0.0 at construction
  }
}

// DeepSpeed's TestOneCycle.test_lr / test_mom: step_lrs[i] = lr_after(i) (read before step i + 1).
TEST(Schedule, DeepSpeedOneCycleAssertions) {
  struct P { double lo, hi, rate; int64_t size, decay_size; };
  for (auto p : {P{1e-5, 1e-2, 1e-3, 10, 10}, P{1e-3, 1e-1, 0, 21, 21}, P{1e-3, 1e-1, 1e-1, 21, 21},
                 P{1e-5, 1e-1, 0, 10, 0}}) {
    const auto s = make_schedule(one_cycle(p.lo, p.hi, p.size, -1, p.rate, p.decay_size, true, 0.8, 0.9, 0), 0.0);
    const int64_t samples = std::max<int64_t>(50, 3 * p.size);
    EXPECT_EQ(s->lr_after(0), p.lo);
    EXPECT_EQ(s->lr_after(p.size), p.hi);
    expect_strictly(true, lrs(*s, 0, p.size), "OneCycle up");
    expect_strictly(false, lrs(*s, p.size, 2 * p.size), "OneCycle down");
    if (p.rate > 0) expect_strictly(false, lrs(*s, 2 * p.size, samples), "OneCycle decay");
  }
  struct M { double lo, hi, rate; int64_t size; };
  for (auto m : {M{0.08, 0.09, 1e-3, 10}, M{0.08, 0.09, 0, 21}}) {
    const auto s = make_schedule(one_cycle(1e-3, 1e-2, m.size, -1, 0, m.size, true, m.lo, m.hi, m.rate), 0.0);
    std::vector<double> moms;
    for (int64_t n = 1; n < std::max<int64_t>(50, 3 * m.size); ++n) moms.push_back(s->betas_after(n).first);
    // DeepSpeed's get_mom() at construction is the formula (max_mom); what it writes into the
    // optimizer there, and what the first step uses, is (cycle_min_mom, 0.99).
    EXPECT_EQ(s->betas_after(0), std::make_pair(m.lo, 0.99));
    EXPECT_EQ(s->betas_after(m.size).first, m.lo);
    expect_strictly(false, {moms.begin(), moms.begin() + m.size}, "momentum down");
    expect_strictly(true, {moms.begin() + m.size - 1, moms.begin() + 2 * m.size}, "momentum up");
    if (m.rate > 0) expect_strictly(true, {moms.begin() + 2 * m.size - 1, moms.end()}, "momentum decay");
    EXPECT_EQ(s->betas_after(3).second, 0.99);
  }
}

// DeepSpeed's TestLrRange: step_lrs[i] = lr_after(i).
TEST(Schedule, DeepSpeedRangeTestAssertions) {
  struct P { double lo, rate; int64_t size; bool stair; };
  for (auto p : {P{1e-4, 1e-5, 1, true}, P{1e-5, 1e-5, 1, false}, P{1e-4, 1e-3, 10, true}, P{1e-3, 1e-3, 10, false},
                 P{1e-2, 1e-2, 19, true}, P{1e-2, 1e-2, 19, false}}) {
    const auto s = make_schedule(range_test(p.lo, p.size, p.rate, p.stair), 0.0);
    const auto v = lrs(*s, 0, std::max<int64_t>(50, 2 * p.size));
    EXPECT_EQ(v[0], p.lo);
    if (!p.stair) {
      expect_strictly(true, v, "continuous");
      continue;
    }
    for (size_t i = 0; i < v.size(); i += p.size) {
      for (size_t j = i; j < std::min(v.size(), i + p.size); ++j) EXPECT_EQ(v[j], v[i]) << "staircase " << j;
    }
  }
}

// The generator's ADAPTIVE parameters.
SchedulerOptions adaptive() {
  SchedulerOptions o;
  o.type = "Adaptive";
  o.adaptive = {1e-3, 20, 0.9, 10, 1.5, 0.5, 0.01, 5, 1e-4};
  return o;
}

std::vector<Decision> feed(Schedule& s, const at::Tensor& losses, int64_t from, int64_t to) {
  std::vector<Decision> all;
  for (int64_t n = from; n <= to; ++n) {
    s.observe(n, losses[n - 1].item<double>());
    for (auto& d : s.take_decisions()) all.push_back(d);
  }
  return all;
}

std::vector<std::pair<int64_t, double>> cuts_of(const std::vector<Decision>& ds) {
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& d : ds) {
    if (d.what == "cut") out.emplace_back(d.step, d.lr);
  }
  return out;
}

TEST(Adaptive, CutStepsMatchTheSimulation) {
  for (const char* curve : {"adaptive_noisy", "adaptive_stairs", "adaptive_flat"}) {
    const auto s = make_schedule(adaptive(), 0.0);
    const auto& losses = fixture().at(std::string(curve) + ".loss");
    const auto cuts = cuts_of(feed(*s, losses, 1, losses.numel()));
    const auto steps = fixture().at(std::string(curve) + ".cut_steps");
    const auto values = fixture().at(std::string(curve) + ".cut_lrs");
    ASSERT_EQ(cuts.size(), static_cast<size_t>(steps.numel())) << curve;
    for (size_t i = 0; i < cuts.size(); ++i) {
      EXPECT_EQ(cuts[i].first, steps[i].item<int64_t>()) << curve << " cut " << i;
      EXPECT_EQ(cuts[i].second, values[i].item<double>()) << curve << " cut " << i;
    }
    // lr_after(n) is the lr after the cuts decided at steps <= n.
    for (int64_t n = 20; n <= losses.numel(); ++n) {
      double expect = 1e-3;
      for (const auto& [step, lr] : cuts) expect = step <= n ? lr : expect;
      ASSERT_EQ(s->lr_after(n), expect) << curve << " n=" << n;
    }
  }
}

TEST(Adaptive, FlatLossClosedForm) {
  // Warm-up ends at step 20 (W); a flat loss never improves: cut when wait reaches the patience
  // (10), then cooldown 5 and patience 15, 23 (22.5 rounded up), 35: steps 30, 50, 78, 118; the
  // fourth cut reaches min_lr (1e-4) and no cut follows.
  const auto s = make_schedule(adaptive(), 0.0);
  const auto ds = feed(*s, at::ones({400}, at::kDouble), 1, 400);
  const std::vector<std::pair<int64_t, double>> expect = {{30, 5e-4}, {50, 2.5e-4}, {78, 1.25e-4}, {118, 1e-4}};
  EXPECT_EQ(cuts_of(ds), expect);
  std::vector<std::string> what;
  for (const auto& d : ds) what.push_back(d.what);
  EXPECT_EQ(what, (std::vector<std::string>{"warmup_done", "cut", "patience:15", "cut", "patience:23", "cut",
                                            "patience:35", "cut", "patience:53", "floor"}));
  EXPECT_EQ(ds.front().step, 20);
  EXPECT_DOUBLE_EQ(ds.front().smoothed_loss, 1.0);
  EXPECT_TRUE(s->take_decisions().empty());
}

TEST(Adaptive, LinearWarmupNeverUsesZero) {
  const auto s = make_schedule(adaptive(), 0.0);
  for (int64_t n = 0; n < 19; ++n) EXPECT_DOUBLE_EQ(s->lr_after(n), 1e-3 * (n + 1) / 20) << n;
  EXPECT_EQ(s->lr_after(19), 1e-3);
  SchedulerOptions o = adaptive();
  o.adaptive.lr = -1;  // the optimizer's lr
  EXPECT_EQ(make_schedule(o, 0.02)->lr_after(500), 0.02);
}

TEST(Adaptive, StateRoundTripsExactly) {
  const auto& losses = fixture().at("adaptive_noisy.loss");
  const auto a = make_schedule(adaptive(), 0.0);
  feed(*a, losses, 1, 215);  // past the first cut, inside a cooldown
  const std::string saved = a->state_json();
  const auto b = make_schedule(adaptive(), 0.0);
  b->load_state_json(saved);
  EXPECT_EQ(b->state_json(), saved);
  const auto da = feed(*a, losses, 216, losses.numel());
  const auto db = feed(*b, losses, 216, losses.numel());
  ASSERT_EQ(da.size(), db.size());
  for (size_t i = 0; i < da.size(); ++i) {
    EXPECT_EQ(da[i].step, db[i].step);
    EXPECT_EQ(da[i].what, db[i].what);
    EXPECT_EQ(da[i].lr, db[i].lr);
    EXPECT_EQ(da[i].smoothed_loss, db[i].smoothed_loss);
  }
  for (int64_t n = 0; n <= losses.numel(); ++n) ASSERT_EQ(a->lr_after(n), b->lr_after(n)) << n;
  EXPECT_EQ(a->state_json(), b->state_json());
  EXPECT_THROW(b->load_state_json("{\"version\": 1}"), UsageError);
  EXPECT_THROW(b->load_state_json("not json"), UsageError);
}

template <class F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Schedule, ErrorsNameTheKey) {
  SchedulerOptions o;
  o.type = "Cosine";
  EXPECT_NE(usage_error([&] { make_schedule(o, 1e-3); }).find("(scheduler.type)"), std::string::npos);
  o = warmup("WarmupDecayLR", 0, 1e-3, 10, "log", 0);
  EXPECT_NE(usage_error([&] { make_schedule(o, 1e-3); }).find("total_num_steps > 0, got 0"), std::string::npos);
  o = one_cycle(-1, 1e-2, 10, -1, 0, 0, true, 0.8, 0.9, 0);
  EXPECT_NE(usage_error([&] { make_schedule(o, 1e-3); }).find("cycle_min_lr"), std::string::npos);
  o = cosine(10, 10, 0.1, 0.0, "log");
  EXPECT_NE(usage_error([&] { make_schedule(o, 1e-3); }).find("max(2, warmup_num_steps), got 10"), std::string::npos);
  o = adaptive();
  o.adaptive.factor = 1.5;
  EXPECT_NE(usage_error([&] { make_schedule(o, 1e-3); }).find("factor must be in (0, 1), got 1.5"), std::string::npos);
}

// A range test over 4 decades: the loss falls fastest (in log lr) at lr = 1e-3, bottoms out, then
// explodes; small deterministic noise on top.
TEST(LrFinder, SteepestDescentBeforeDivergence) {
  std::vector<double> lrs, losses;
  for (int i = 0; i < 120; ++i) {
    const double lr = 1e-5 * std::pow(10.0, 4.0 * i / 119);
    const double x = std::log10(lr) + 3;  // 0 at 1e-3
    double loss = 2.5 - 1.5 / (1 + std::exp(-3 * x)) + 0.02 * std::sin(7.0 * i);
    if (lr > 2e-2) loss += std::pow((std::log10(lr) + 1.7) * 10, 2);
    lrs.push_back(lr);
    losses.push_back(loss);
  }
  const double lr = suggest_lr(lrs, losses);
  EXPECT_GT(lr, 1e-3 / 1.5);
  EXPECT_LT(lr, 1e-3 * 1.5);
  // NaN at the end (a diverged run) changes nothing.
  losses.back() = NAN;
  EXPECT_EQ(suggest_lr(lrs, losses), lr);
  // A loss that only rises: the smallest lr.
  std::vector<double> rising(lrs.size());
  for (size_t i = 0; i < rising.size(); ++i) rising[i] = 1.0 + static_cast<double>(i);
  EXPECT_EQ(suggest_lr(lrs, rising), lrs.front());
  EXPECT_NE(usage_error([&] { suggest_lr({1e-3, 1e-2}, {1.0}); }).find("2 lrs but 1 losses"), std::string::npos);
  EXPECT_NE(usage_error([&] { suggest_lr({1, 2, 2, 3, 4}, {1, 1, 1, 1, 1}); }).find("strictly increasing"),
            std::string::npos);
}

}  // namespace
}  // namespace xtrain::sched::schedule_test
