// `optimizer: {type, params}` — DeepSpeed's names and defaults (reference/deepspeed.md §a.2) — and
// `xtrain.param_groups`. Plain structs; `visit` lists every key once, for the config reader, the
// resolved-config writer and docs/config.md. Which type exists, its params and how it is built
// are the optimizer registry's (optim/registry.h; the config half: config/optimizer_types.h).
#pragma once
#include <any>
#include <string>
#include <vector>

namespace xtrain::optim {

struct AdamParams {
  double lr = 1e-3;
  std::vector<double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;
  bool adam_w_mode = true;  // DeepSpeed's "Adam" decays decoupled by default
  bool torch_adam = false;
  bool amsgrad = false;
  std::string state_dtype = "fp32";  // xtrain: "int8" keeps the moments block-wise 8-bit (adam8bit.h)
  template <class V>
  void visit(V& v) {
    v("lr", lr, "learning rate");
    v("betas", betas, "coefficients for the running averages of the gradient and its square");
    v("eps", eps, "term added to the denominator");
    v("weight_decay", weight_decay, "weight decay (decoupled when adam_w_mode)");
    v("bias_correction", bias_correction, "apply Adam's bias correction");
    v("adam_w_mode", adam_w_mode, "decoupled weight decay (AdamW); false = L2 added to the gradient");
    v("torch_adam", torch_adam, "accepted for compatibility; xtrain always uses its fused kernel");
    v("amsgrad", amsgrad, "not supported (as in DeepSpeed's fused Adam)");
    v("state_dtype", state_dtype,
      "xtrain (DeepSpeed has no such key): \"fp32\" or \"int8\": exp_avg and exp_avg_sq as block-wise 8-bit codes "
      "(bitsandbytes' dynamic map, one fp32 absmax per 2048 values; CPU step only); Adam and AdamW only");
  }
};

struct LambParams {
  double lr = 1e-3;
  bool bias_correction = true;
  std::vector<double> betas = {0.9, 0.999};
  double eps = 1e-8;
  bool eps_inside_sqrt = false;
  double weight_decay = 0.0;
  double max_coeff = 10.0;
  double min_coeff = 0.01;
  template <class V>
  void visit(V& v) {
    v("lr", lr, "learning rate");
    v("bias_correction", bias_correction, "apply Adam's bias correction");
    v("betas", betas, "coefficients for the running averages");
    v("eps", eps, "term added to the denominator");
    v("eps_inside_sqrt", eps_inside_sqrt, "add eps inside the square root");
    v("weight_decay", weight_decay, "weight decay added to the update before the trust ratio");
    v("max_coeff", max_coeff, "upper clamp of the layer-wise trust ratio");
    v("min_coeff", min_coeff, "lower clamp of the layer-wise trust ratio");
  }
};

struct SgdParams {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  template <class V>
  void visit(V& v) {
    v("lr", lr, "learning rate");
    v("momentum", momentum, "momentum factor");
    v("dampening", dampening, "dampening for momentum");
    v("weight_decay", weight_decay, "L2 penalty added to the gradient");
    v("nesterov", nesterov, "Nesterov momentum");
  }
};

// One entry of xtrain.param_groups (DeepSpeed's model_parameters groups): the parameters whose
// names match one of the globs step with lr * lr_scale and this weight decay. The first matching
// group wins; parameters no group matches keep the default groups (decay / no_decay).
struct ParamGroupSpec {
  std::vector<std::string> params;  // globs over parameter names: '*' any run, '?' one character
  double lr_scale = 1.0;
  double weight_decay = -1.0;  // -1: the optimizer's weight_decay
  template <class V>
  void visit(V& v) {
    v("params", params, "globs over parameter names ('*', '?'); a glob list matching nothing is an error");
    v("lr_scale", lr_scale, "the group's lr = the schedule's lr * lr_scale");
    v("weight_decay", weight_decay, "the group's weight decay (-1: optimizer.params.weight_decay)");
  }
};

// `type` is normalised by the config reader to a registered name ("Adam", "AdamW", "Lamb", "SGD"
// or one added with optim::register_optimizer).
struct OptimizerOptions {
  std::string type = "AdamW";
  AdamParams adam;  // Adam and AdamW
  LambParams lamb;
  SgdParams sgd;
  std::any custom;  // the params of a registered optimizer that is not built in (its own struct)
  // xtrain: no weight decay for biases and norm weights (parameters with < 2 dims), as nanoGPT.
  bool no_decay_for_bias_and_norm = true;
  std::vector<ParamGroupSpec> param_groups;  // xtrain.param_groups

  // The type's learning rate and weight decay (its registry entry reads its own params; defined in
  // optim/registry.cpp).
  double lr() const;
  double weight_decay() const;
};

}  // namespace xtrain::optim
