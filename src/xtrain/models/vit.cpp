// Vision Transformer (see vit.h). Patch extraction is a view + permute + one GEMM: the same numbers
// as torch.nn.Conv2d(kernel = stride = P) with the weight viewed [C, channels, P, P], which
// tests/reference/gen_vit.py uses as its independent reference.
#include "xtrain/models/vit.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <torch/nn/init.h>

#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/kernels/activation.h"
#include "xtrain/kernels/ms_attention/windows.h"

namespace xtrain::models {
namespace {

int64_t positive_int(const nlohmann::json& value, const std::string& key) {
  XTRAIN_USAGE_CHECK(value.is_number_integer() && value.get<int64_t>() > 0, "models: xtrain.model.args.", key,
                     " must be an integer > 0, got ", value.dump());
  return value.get<int64_t>();
}

void read_image_size(const nlohmann::json& value, VitArgs& a) {
  if (value.is_array() && value.size() == 2) {
    a.image_h = positive_int(value[0], "image_size[0]");
    a.image_w = positive_int(value[1], "image_size[1]");
  } else {
    XTRAIN_USAGE_CHECK(value.is_number_integer(), "models: xtrain.model.args.image_size must be N or [H, W], got ",
                       value.dump());
    a.image_h = a.image_w = value.get<int64_t>() == 0 ? 0 : positive_int(value, "image_size");
  }
}

// The square image in_features holds, when the config did not say.
void derive_image_size(const ModelOptions& o, VitArgs& a) {
  if (a.image_h > 0 || o.in_features <= 0) return;
  const int64_t pixels = o.in_features / a.channels;
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(pixels))));
  XTRAIN_USAGE_CHECK(pixels * a.channels == o.in_features && side * side == pixels, "models: vit cannot tell the ",
                     "image size from ", o.in_features, " input features over ", a.channels,
                     " channel(s) (not a square); set xtrain.model.args.image_size to [H, W]");
  a.image_h = a.image_w = side;
}

}  // namespace

VitArgs vit_args(const ModelOptions& o) {
  VitArgs a;
  XTRAIN_USAGE_CHECK(o.args.is_object(), "models: xtrain.model.args must be a JSON object, got ", o.args.dump());
  for (const auto& [key, value] : o.args.items()) {
    if (key == "patch") {
      a.patch = positive_int(value, key);
    } else if (key == "mlp_ratio") {
      a.mlp_ratio = positive_int(value, key);
    } else if (key == "channels") {
      a.channels = positive_int(value, key);
    } else if (key == "pool") {
      XTRAIN_USAGE_CHECK(value.is_string() && (value == "cls" || value == "mean"),
                         "models: xtrain.model.args.pool must be \"cls\" or \"mean\", got ", value.dump());
      a.pool = value.get<std::string>();
    } else if (key == "image_size") {
      read_image_size(value, a);
    } else {
      XTRAIN_USAGE_ERROR("models: xtrain.model.args.", key,
                         " is not a vit setting (patch, mlp_ratio, pool, channels, image_size)");
    }
  }
  derive_image_size(o, a);
  if (a.image_h > 0) {
    XTRAIN_USAGE_CHECK(a.image_h % a.patch == 0 && a.image_w % a.patch == 0, "models: vit's patch ",
                       "(xtrain.model.args.patch = ", a.patch, ") must divide the image's height and width (", a.image_h,
                       "x", a.image_w, "); resize the images (xtrain.data.image_size) or pick another patch");
  }
  XTRAIN_USAGE_CHECK(o.layers > 0, "models: xtrain.model.layers must be > 0, got ", o.layers);
  XTRAIN_USAGE_CHECK(o.heads > 0 && o.d_model > 0 && o.d_model % o.heads == 0, "models: xtrain.model.heads (", o.heads,
                     ") must be > 0 and divide xtrain.model.d_model (", o.d_model, ")");
  if (o.attention.type == "multiscale") kernels::ms_attention::check_windows(o.heads, o.attention.windows);
  return a;
}

VitMlpImpl::VitMlpImpl(int64_t C, int64_t hidden, double dropout) : dropout_(dropout) {
  fc = register_module("fc", nn::Linear(C, hidden));
  proj = register_module("proj", nn::Linear(hidden, C));
}

at::Tensor VitMlpImpl::forward(const at::Tensor& x) {
  return kernels::dropout(proj->forward(kernels::gelu_tanh(fc->forward(x))), dropout_, is_training());
}

VitBlockImpl::VitBlockImpl(const nn::GridAttentionOptions& attention, int64_t mlp_hidden) {
  ln1 = register_module("ln1", nn::LayerNorm(attention.embed_dim));
  attn = register_module("attn", nn::GridAttention(attention));
  ln2 = register_module("ln2", nn::LayerNorm(attention.embed_dim));
  mlp = register_module("mlp", VitMlp(attention.embed_dim, mlp_hidden, attention.dropout));
}

at::Tensor VitBlockImpl::forward(const at::Tensor& x) {
  auto h = attn->forward(ln1->forward(x)).add_(x);
  return mlp->forward(ln2->forward(h)).add_(h);
}

VitImpl::VitImpl(const ModelOptions& options) : options_(options), args_(vit_args(options)) {
  XTRAIN_USAGE_CHECK(options.num_classes > 0, "models: vit needs xtrain.model.num_classes > 0 (set it or use an ",
                     "image dataset), got ", options.num_classes);
  XTRAIN_USAGE_CHECK(args_.image_h > 0, "models: vit needs the image size: use an image dataset or set ",
                     "xtrain.model.args.image_size");
  XTRAIN_USAGE_CHECK(options.dropout >= 0 && options.dropout < 1, "models: xtrain.model.dropout must be in [0, 1), got ",
                     options.dropout);
  const int64_t C = options.d_model, P = args_.patch;
  const bool cls = args_.pool == "cls";
  nn::GridAttentionOptions att;
  att.embed_dim = C;
  att.num_heads = options.heads;
  att.grid_h = grid_h();
  att.grid_w = grid_w();
  att.cls_token = cls;
  if (options.attention.type == "multiscale") att.windows = options.attention.windows;
  att.dropout = options.dropout;
  att.kernel = options.attention.kernel;
  patch_embed = register_module("patch_embed", nn::Linear(args_.channels * P * P, C));
  if (cls) cls_token = register_parameter("cls_token", at::empty({1, 1, C}));
  pos_embed = register_parameter("pos_embed", at::empty({1, grid_h() * grid_w() + (cls ? 1 : 0), C}));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.layers; ++i) blocks->push_back(VitBlock(att, args_.mlp_ratio * C));
  ln_f = register_module("ln_f", nn::LayerNorm(C));
  head = register_module("head", nn::Linear(C, options.num_classes));
  // timm's ViT: position embeddings and class token N(0, 0.02), block and head linears N(0, 0.02)
  // with zero bias; the patch embedding keeps PyTorch's default (a conv's) init.
  at::NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {
    auto* linear = dynamic_cast<nn::LinearImpl*>(m.get());
    if (linear == nullptr || m.get() == patch_embed.get()) continue;
    torch::nn::init::normal_(linear->weight, 0.0, 0.02);
    torch::nn::init::zeros_(linear->bias);
  }
  torch::nn::init::normal_(pos_embed, 0.0, 0.02);
  if (cls) torch::nn::init::normal_(cls_token, 0.0, 0.02);
}

at::Tensor VitImpl::forward(const at::Tensor& x) {
  const int64_t P = args_.patch, gh = grid_h(), gw = grid_w(), ch = args_.channels;
  XTRAIN_USAGE_CHECK(x.dim() == 4 && x.size(1) == ch && x.size(2) == args_.image_h && x.size(3) == args_.image_w,
                     "models: vit expects images [B, ", ch, ", ", args_.image_h, ", ", args_.image_w, "], got ",
                     x.sizes(), " (xtrain.model.args.image_size / channels, or xtrain.data.image_size)");
  const int64_t B = x.size(0);
  auto h = patch_embed->forward(patchify(x, gh, gw, P));
  if (cls_token.defined()) h = at::cat({cls_token.expand({B, 1, h.size(2)}), h}, 1);
  h = kernels::dropout(h + pos_embed, options_.dropout, is_training());
  for (const auto& b : *blocks) h = b->as<VitBlockImpl>()->forward(h);
  h = ln_f->forward(h);
  const auto pooled = cls_token.defined() ? h.select(1, 0) : h.mean(1);
  return head->forward(pooled);
}

at::Tensor patchify(const at::Tensor& images, int64_t gh, int64_t gw, int64_t patch) {
  const int64_t B = images.size(0), ch = images.size(1), P = patch;
  return images.reshape({B, ch, gh, P, gw, P}).permute({0, 2, 4, 1, 3, 5}).reshape({B, gh * gw, ch * P * P});
}

ModelEntry vit_entry() {
  ModelEntry e;
  e.description = "Vision Transformer: linear patch embedding, class token or mean pool, learned positions, pre-LN "
                  "blocks with dense or 2-D multi-scale attention over the patch grid";
  e.task = "classify";
  e.build = [](const ModelOptions& o) {
    auto m = Vit(o).ptr();
    return Model{m, [m](const at::Tensor& x) { return m->forward(x); }, "classify", o};
  };
  e.keys = {{"layers", ""}, {"d_model", ""}, {"heads", ""}, {"dropout", ""},
            {"attention", "dense, or multiscale with windows (square sides in patches)"},
            {"num_classes", "0: from the dataset"}, {"in_features", "0: from the dataset (gives the image size)"},
            {"args.patch", "patch side in pixels (default 4)"}, {"args.mlp_ratio", "MLP width / d_model (default 4)"},
            {"args.pool", "cls (default: class token) or mean"}, {"args.channels", "input channels (default 1)"},
            {"args.image_size", "N or [H, W] (default: square, from in_features)"}};
  e.validate = [](const ModelOptions& o) { vit_args(o); };
  e.tiny = [](const ModelOptions&, const TinyLimits&) { return std::vector<std::pair<std::string, int64_t>>{{"layers", 1}}; };
  e.sample_shape = [](const ModelOptions& o) {
    const VitArgs a = vit_args(o);
    return std::vector<int64_t>{a.channels, a.image_h, a.image_w};
  };
  return e;
}

}  // namespace xtrain::models
