// pipeline.stages > 1 as a models::Model: this rank's PipelineGPT stage (gpt_pipeline.h) of a
// whole GPT or TensorParallelGPT built on every rank, with a Model::forward that runs the whole
// pipeline for evaluation and sampling: every rank of the pipeline group calls it with the same
// ids, hidden states go stage to stage (fp32 on the wire), and the last stage's logits (gathered
// over the tensor-parallel group) are broadcast to all stages.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/models/factory.h"

namespace xtrain::comm {
class Communicator;
}

namespace xtrain::models {

class PipelineGPTImpl;


// Replaces model.module by stage `stage` of `stages` (the whole model's other modules are freed
// once `model` drops them) and model.forward by the pipeline's forward over `pp` (rank = stage)
// and `tp`. `partition`: "uniform" | "parameters". UsageError for a model other than a gpt
// (pipeline.stages > 1 needs one) and as PipelineGPTImpl's constructor. Returns the stage.
std::shared_ptr<PipelineGPTImpl> cut_pipeline_stage(Model& model, int stage, int stages, const std::string& partition,
                                                    std::shared_ptr<comm::Communicator> pp,
                                                    std::shared_ptr<comm::Communicator> tp);

// The tied embedding's two copies (first and last stage) count once in the gradient norm: each
// of the stage's tied parameters weighs half what `weights` gave it (1 when absent).
void halve_tied_norm_weights(const std::vector<std::string>& tied, std::map<std::string, double>& weights);

}  // namespace xtrain::models
