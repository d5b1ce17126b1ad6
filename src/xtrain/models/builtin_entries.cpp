// The built-in entries (see builtin_entries.h). Built-ins check the sizes the dataset fills (num_classes,
// in_features) when they build, not in validate(): at config time those may still be 0.
#include "xtrain/models/builtin_entries.h"

#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/models/generate.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_checkpointing.h"
#include "xtrain/models/gpt_pipeline.h"
#include "xtrain/models/gpt_pipeline_model.h"
#include "xtrain/models/gpt_tensor_parallel_model.h"
#include "xtrain/models/kv_cache.h"
#include "xtrain/models/mlp_classifier.h"
#include "xtrain/models/resnet.h"

namespace xtrain::models {
namespace {

// A classifier of the image datasets: `make(options)` returns its module (with forward(x)) once
// num_classes is known (the dataset fills it).
template <class Make>
ModelEntry classifier_entry(const std::string& description, std::vector<ModelKey> keys, Make make) {
  ModelEntry e;
  e.description = description;
  e.task = "classify";
  e.build = [make](const ModelOptions& o) {
    XTRAIN_USAGE_CHECK(o.num_classes > 0, "models: ", o.type,
                       " needs xtrain.model.num_classes > 0 (set it or use an image dataset), got ", o.num_classes);
    auto module = make(o);
    return Model{module, [module](const at::Tensor& x) { return module->forward(x); }, "classify", o};
  };
  e.keys = std::move(keys);
  return e;
}

// A whole GPT samples with its own forward; a tensor- or pipeline-parallel one through the model's
// whole forward, every rank in step.
std::vector<int64_t> gpt_generate(const Model& model, const std::vector<int64_t>& prompt, const Sampling& s) {
  if (auto gpt = std::dynamic_pointer_cast<GPTImpl>(model.module)) {
    return generate(*gpt, prompt, s.tokens, s.temperature, s.top_k, s.seed);
  }
  XTRAIN_USAGE_CHECK(model.options.vocab > 0, "generate: the model's options are unknown");
  auto last_logits = [&model](const at::Tensor& context) {
    return model.forward(context).select(1, context.size(1) - 1);
  };
  return generate(last_logits, *model.module, model.options, prompt, s.tokens, s.temperature, s.top_k, s.seed);
}

// The config's heads up to 4 (so the default 4 heads over 3 windows keeps its uneven split), raised
// to cover every multi-scale window and rounded up to a multiple of the tensor-parallel size; one
// layer per pipeline stage; the context capped.
std::vector<std::pair<std::string, int64_t>> gpt_tiny(const ModelOptions& m, const TinyLimits& l) {
  const int64_t tp = std::max<int64_t>(1, l.tp);
  const int64_t windows = m.attention.type == "multiscale" ? static_cast<int64_t>(m.attention.windows.size()) : 0;
  int64_t heads = std::max({std::min<int64_t>(m.heads, 4), windows, tp, int64_t{1}});
  heads = (heads + tp - 1) / tp * tp;
  return {{"layers", std::max<int64_t>(1, l.stages)},
          {"heads", heads},
          {"d_model", heads * l.head_size},
          {"seq_len", std::min(m.seq_len, l.seq_len)}};
}

TensorParallelModel gpt_tensor_parallel(const ModelOptions& o, std::shared_ptr<comm::Communicator> tp) {
  TensorParallelModel out;
  out.model = build_tensor_parallel_gpt(o, std::move(tp));
  out.train_loss = tensor_parallel_train_loss(out.model);
  return out;
}

PipelineStageModel gpt_pipeline_stage(Model& model, const PipelineCut& c) {
  auto stage = cut_pipeline_stage(model, c.stage, c.stages, c.partition, c.pp, c.tp);
  TORCH_INTERNAL_ASSERT(c.checkpointing != nullptr, "gpt_pipeline_stage: PipelineCut.checkpointing is null");
  apply_pipeline_checkpoint_interval(*stage, c.checkpoint_interval, *c.checkpointing);
  PipelineStageModel out;
  out.forward = [stage](const at::Tensor& x) { return stage->forward(x); };
  out.tensor_parallel_loss = [stage](const at::Tensor& y, const at::Tensor& target) { return stage->loss(y, target); };
  out.tied = stage->tied_parameters();
  return out;
}

}  // namespace

ModelEntry gpt_entry() {
  ModelEntry e;
  e.description = "GPT-2 layout (nanoGPT): token + position embeddings, pre-LN blocks, tied LM head";
  e.task = "lm";
  e.build = [](const ModelOptions& o) {
    auto gpt = GPT(o).ptr();
    return Model{gpt, [gpt](const at::Tensor& idx) { return gpt->forward(idx); }, "lm", o};
  };
  e.keys = {{"layers", ""}, {"d_model", ""}, {"heads", ""}, {"seq_len", ""}, {"vocab", ""},
            {"dropout", ""}, {"tie_embeddings", ""}, {"attention", ""},
            {"args.mlp_ratio", "MLP width / d_model (default 4, GPT-2's)"}};
  e.sample_shape = [](const ModelOptions& o) { return std::vector<int64_t>{o.seq_len}; };
  e.generate = gpt_generate;
  e.tiny = gpt_tiny;
  e.tensor_parallel = gpt_tensor_parallel;
  e.pipeline_stage = gpt_pipeline_stage;
  e.checkpoint_activations = [](torch::nn::Module& m, const nn::ActivationCheckpointingOptions& o) {
    apply_activation_checkpointing(m, o);
  };
  e.incremental_decoder = [](const Model& m, const DecoderWeights& w) {
    auto gpt = std::dynamic_pointer_cast<GPTImpl>(m.module);
    XTRAIN_USAGE_CHECK(gpt != nullptr, "kv_cache: the gpt entry's module is not a whole GPT (a tensor- or ",
                       "pipeline-parallel model decodes without the cache)");
    return make_gpt_decoder(gpt, w);
  };
  return e;
}

ModelEntry resnet18_entry() {
  auto e = classifier_entry("ResNet-18, CIFAR-style stem, 1-channel input", {{"num_classes", ""}},
                            [](const ModelOptions& o) { return ResNet18(o.num_classes).ptr(); });
  e.sample_shape = [](const ModelOptions&) { return std::vector<int64_t>{1, 28, 28}; };  // the image datasets
  return e;
}

ModelEntry mlp_entry() {
  auto e = classifier_entry("multi-layer perceptron over the flattened sample",
                            {{"hidden", ""}, {"dropout", ""}, {"num_classes", ""}, {"in_features", ""}},
                            [](const ModelOptions& o) {
                              XTRAIN_USAGE_CHECK(o.in_features > 0, "models: mlp needs xtrain.model.in_features > 0 "
                                                 "(set it or use an image dataset), got ", o.in_features);
                              return MlpClassifier(o.in_features, o.hidden, o.num_classes, o.dropout).ptr();
                            });
  // 784 features: a flattened 28×28 image, exported as one.
  e.sample_shape = [](const ModelOptions& o) {
    return o.in_features == 28 * 28 ? std::vector<int64_t>{1, 28, 28} : std::vector<int64_t>{o.in_features};
  };
  return e;
}

}  // namespace xtrain::models
