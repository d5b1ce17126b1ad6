// `optimizer: {type, params}` — DeepSpeed's names and defaults (reference/deepspeed.md §a.2).
// Plain structs; `visit` lists every key once, for the config reader, the resolved-config writer
// and docs/config.md.
#pragma once
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

// `type` is normalised by the config reader to one of: "Adam", "AdamW", "Lamb", "SGD".
struct OptimizerOptions {
  std::string type = "AdamW";
  AdamParams adam;
  LambParams lamb;
  SgdParams sgd;
  // xtrain: no weight decay for biases and norm weights (parameters with < 2 dims), as nanoGPT.
  bool no_decay_for_bias_and_norm = true;

  double lr() const { return type == "Lamb" ? lamb.lr : type == "SGD" ? sgd.lr : adam.lr; }
  double weight_decay() const {
    return type == "Lamb" ? lamb.weight_decay : type == "SGD" ? sgd.weight_decay : adam.weight_decay;
  }
};

}  // namespace xtrain::optim
