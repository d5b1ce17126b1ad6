#include "xtrain/precision/loss_scaler.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "xtrain/base/error.h"

namespace xtrain::precision {

LossScaler::LossScaler(const Fp16Options& o) : enabled_(o.enabled) {
  if (!enabled_) return;
  XTRAIN_USAGE_CHECK(o.loss_scale >= 0, "fp16: loss_scale must be >= 0 (0 = dynamic), got ", o.loss_scale,
                     " (fp16.loss_scale)");
  XTRAIN_USAGE_CHECK(o.loss_scale_window > 0, "fp16: loss_scale_window must be > 0, got ", o.loss_scale_window,
                     " (fp16.loss_scale_window)");
  XTRAIN_USAGE_CHECK(o.hysteresis >= 1, "fp16: hysteresis must be >= 1, got ", o.hysteresis, " (fp16.hysteresis)");
  XTRAIN_USAGE_CHECK(o.min_loss_scale > 0, "fp16: min_loss_scale must be > 0, got ", o.min_loss_scale,
                     " (fp16.min_loss_scale)");
  dynamic_ = o.loss_scale == 0;
  scale_ = dynamic_ ? std::ldexp(1.0, static_cast<int>(o.initial_scale_power)) : o.loss_scale;
  min_scale_ = o.min_loss_scale;
  window_ = o.loss_scale_window;
  hysteresis_ = cur_hysteresis_ = o.hysteresis;
  consecutive_hysteresis_ = o.consecutive_hysteresis;
}

ScalerUpdate LossScaler::update(bool overflow) {
  ScalerUpdate r;
  if (!enabled_) return r;
  r.skipped = overflow;
  if (!dynamic_) {  // static scale: an overflowing step is skipped, the scale stays
    if (overflow) r.message = c10::str("overflow at static loss scale ", scale_, ": step skipped");
    ++cur_iter_;
    return r;
  }
  if (overflow) {
    if (hysteresis_ == 1 || cur_hysteresis_ == 1) {
      XTRAIN_USAGE_CHECK(scale_ != min_scale_,
                         "fp16: gradients overflowed at the minimum loss scale (", min_scale_,
                         ") — training cannot continue in fp16. Try, in this order: bf16 instead of fp16 "
                         "(\"bf16\": {\"enabled\": true}: same speed on recent hardware, no overflow), a lower "
                         "learning rate or gradient_clipping, or a higher fp16.min_loss_scale. Overflows that "
                         "persist at every scale usually mean the model itself produces inf/NaN.");
      const double old = scale_;
      scale_ = std::max(scale_ / 2.0, min_scale_);
      r.scale_changed = true;
      r.message = c10::str("overflow: loss scale ", old, " -> ", scale_, ", step skipped");
    } else {
      --cur_hysteresis_;
      r.message = c10::str("overflow at loss scale ", scale_, ": hysteresis ", cur_hysteresis_ + 1, " -> ",
                           cur_hysteresis_, ", step skipped");
    }
    last_overflow_iter_ = cur_iter_;
  } else {
    if (consecutive_hysteresis_) cur_hysteresis_ = hysteresis_;
    if ((cur_iter_ - last_overflow_iter_) % window_ == 0) {
      if (!consecutive_hysteresis_) cur_hysteresis_ = hysteresis_;
      scale_ *= 2.0;
      r.scale_changed = true;
      r.message = c10::str("no overflow for ", window_, " steps: loss scale ", scale_ / 2.0, " -> ", scale_);
    }
  }
  ++cur_iter_;
  return r;
}

std::string LossScaler::state_json() const {
  nlohmann::json j = {{"scale", scale_},          {"cur_iter", cur_iter_},
                      {"last_overflow_iter", last_overflow_iter_}, {"cur_hysteresis", cur_hysteresis_}};
  return j.dump();
}

void LossScaler::load_state_json(const std::string& text) {
  if (text.empty()) return;
  const auto j = nlohmann::json::parse(text);
  scale_ = j.at("scale").get<double>();
  cur_iter_ = j.at("cur_iter").get<int64_t>();
  last_overflow_iter_ = j.at("last_overflow_iter").get<int64_t>();
  cur_hysteresis_ = j.at("cur_hysteresis").get<int64_t>();
}

}  // namespace xtrain::precision
