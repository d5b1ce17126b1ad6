// int8_decoder_weights: one entry per quantised graph node, by its module path.
#include "xtrain/serve/served_model.h"

#include "xtrain/base/error.h"
#include "xtrain/compress/graph/graph.h"
#include "xtrain/compress/quant/quant_plan.h"

namespace xtrain::serve {

models::DecoderWeights int8_decoder_weights(const compress::Graph& graph, const compress::QuantPlan& plan) {
  XTRAIN_USAGE_CHECK(plan.stage() == compress::QuantStage::kConverted,
                     "serve: the quantisation plan is not converted to int8 (quant.json of xtrain compress)");
  models::DecoderWeights w;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const auto& n = graph.nodes[i];
    const auto& l = plan.at(i);
    if (!l.enabled) continue;
    if (n.kind == compress::OpKind::kLinear && l.linear) {
      auto linear = l.linear;
      w.linears[n.name] = [linear](const at::Tensor& x) { return linear->forward(x); };
    } else if (n.kind == compress::OpKind::kEmbedTokens) {
      w.wte = l.table_f32, w.wpe = l.positions_f32;
    }
  }
  return w;
}

}  // namespace xtrain::serve
