#include "xtrain/config/batch.h"

#include "xtrain/base/error.h"

namespace xtrain::config {
namespace {

std::string shown(std::optional<int64_t> v) { return v ? std::to_string(*v) : std::string("?"); }

// DeepSpeed asserts each given value > 0 ("... has to be greater than 0"); checked before any value
// divides another, with the equation as far as it is known.
void check_given(std::optional<int64_t> tb, std::optional<int64_t> mb, std::optional<int64_t> gas, int64_t w) {
  const std::string equation = c10::str("train_batch_size (", shown(tb), ") = train_micro_batch_size_per_gpu (",
                                        shown(mb), ") * gradient_accumulation_steps (", shown(gas),
                                        ") * data-parallel size (", w, ")");
  auto check = [&](std::optional<int64_t> v, const char* key) {
    XTRAIN_USAGE_CHECK(!v || *v > 0, "config: ", key, " must be > 0, got ", *v, ": ", equation);
  };
  check(tb, "train_batch_size");
  check(mb, "train_micro_batch_size_per_gpu");
  check(gas, "gradient_accumulation_steps");
}

}  // namespace

BatchTriple resolve_batch(std::optional<int64_t> tb, std::optional<int64_t> mb, std::optional<int64_t> gas,
                          int64_t w) {
  XTRAIN_USAGE_CHECK(w > 0, "config: data-parallel world size must be > 0, got ", w);
  XTRAIN_USAGE_CHECK(tb || mb,
                     "config: give train_batch_size or train_micro_batch_size_per_gpu (or both); "
                     "train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * ",
                     "data-parallel size (", w, ")");
  check_given(tb, mb, gas, w);
  BatchTriple r;
  std::string derived;
  if (tb && mb && gas) {
    r = {*tb, *mb, *gas, ""};
  } else if (tb && mb) {
    r = {*tb, *mb, (*tb / *mb) / w, ""};
    derived = "gradient_accumulation_steps";
  } else if (tb && gas) {
    r = {*tb, (*tb / w) / *gas, *gas, ""};
    derived = "train_micro_batch_size_per_gpu";
  } else if (mb && gas) {
    r = {*mb * *gas * w, *mb, *gas, ""};
    derived = "train_batch_size";
  } else if (tb) {
    r = {*tb, *tb / w, 1, ""};
    derived = "train_micro_batch_size_per_gpu, gradient_accumulation_steps";
  } else {
    r = {*mb * w, *mb, 1, ""};
    derived = "train_batch_size, gradient_accumulation_steps";
  }
  auto equation = [&] {
    return c10::str("train_batch_size (", r.train_batch_size, ") must equal train_micro_batch_size_per_gpu (",
                    r.micro_batch, ") * gradient_accumulation_steps (", r.grad_accum,
                    ") * data-parallel size (", w, ") = ", r.micro_batch * r.grad_accum * w,
                    derived.empty() ? "" : "; derived: " + derived);
  };
  XTRAIN_USAGE_CHECK(r.train_batch_size > 0, "config: train_batch_size must be > 0: ", equation());
  XTRAIN_USAGE_CHECK(r.micro_batch > 0, "config: train_micro_batch_size_per_gpu must be > 0: ", equation());
  XTRAIN_USAGE_CHECK(r.grad_accum > 0, "config: gradient_accumulation_steps must be > 0: ", equation());
  XTRAIN_USAGE_CHECK(r.train_batch_size == r.micro_batch * r.grad_accum * w, "config: ", equation());
  r.derived = derived;
  return r;
}

}  // namespace xtrain::config
