// make_optimizer: the one place that maps OptimizerOptions::type to an implementation and checks
// the options every optimizer relies on (the config reader checks them too; the library may be
// used without it).
#include "xtrain/optim/optimizer.h"

#include "xtrain/base/error.h"
#include "xtrain/optim/adam.h"
#include "xtrain/optim/lamb.h"
#include "xtrain/optim/sgd.h"

namespace xtrain::optim {

namespace {

void check_betas(const std::vector<double>& betas) {
  XTRAIN_USAGE_CHECK(betas.size() == 2, "optim: betas must hold 2 numbers, got ", betas.size(),
                     " (optimizer.params.betas)");
  for (double b : betas) {
    XTRAIN_USAGE_CHECK(b >= 0 && b < 1, "optim: betas must be in [0, 1), got ", b, " (optimizer.params.betas)");
  }
}

void check_common(double lr, double weight_decay) {
  XTRAIN_USAGE_CHECK(lr >= 0, "optim: lr must be >= 0, got ", lr, " (optimizer.params.lr)");
  XTRAIN_USAGE_CHECK(weight_decay >= 0, "optim: weight_decay must be >= 0, got ", weight_decay,
                     " (optimizer.params.weight_decay)");
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options) {
  check_common(options.lr(), options.weight_decay());
  if (options.type == "Adam" || options.type == "AdamW") {
    const auto& a = options.adam;
    check_betas(a.betas);
    XTRAIN_USAGE_CHECK(a.eps >= 0, "optim: eps must be >= 0, got ", a.eps, " (optimizer.params.eps)");
    XTRAIN_USAGE_CHECK(!a.amsgrad, "optim: not supported yet: optimizer.params.amsgrad");
    return std::make_unique<Adam>(a, options.type == "AdamW" || a.adam_w_mode, options.type);
  }
  if (options.type == "Lamb") {
    const auto& l = options.lamb;
    check_betas(l.betas);
    XTRAIN_USAGE_CHECK(l.eps >= 0, "optim: eps must be >= 0, got ", l.eps, " (optimizer.params.eps)");
    XTRAIN_USAGE_CHECK(l.min_coeff > 0 && l.min_coeff <= l.max_coeff, "optim: need 0 < min_coeff <= max_coeff, got ",
                       l.min_coeff, " and ", l.max_coeff, " (optimizer.params.min_coeff, max_coeff)");
    return std::make_unique<Lamb>(l);
  }
  if (options.type == "SGD") {
    const auto& s = options.sgd;
    XTRAIN_USAGE_CHECK(s.momentum >= 0, "optim: momentum must be >= 0, got ", s.momentum,
                       " (optimizer.params.momentum)");
    XTRAIN_USAGE_CHECK(!s.nesterov || (s.momentum > 0 && s.dampening == 0),
                       "optim: nesterov needs momentum > 0 and dampening = 0, got momentum ", s.momentum,
                       " and dampening ", s.dampening, " (optimizer.params.nesterov)");
    return std::make_unique<Sgd>(s);
  }
  XTRAIN_USAGE_ERROR("optim: unknown optimizer type \"", options.type,
                     "\"; expected Adam, AdamW, Lamb or SGD (optimizer.type)");
}

}  // namespace xtrain::optim
