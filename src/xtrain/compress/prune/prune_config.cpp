// resolve_targets: NNI's matching rules over the traced graph's Linear and Conv2d layers.
#include "xtrain/compress/prune/prune_config.h"

#include <algorithm>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::compress {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void check_rule(const PruneRule& r, size_t i, const std::vector<std::string>& names) {
  const std::string where = c10::str("pruning.config_list[", i, "]");
  XTRAIN_USAGE_CHECK(!r.op_types.empty() || !r.op_names.empty(), "compress: ", where,
                     " needs op_types or op_names to select layers");
  if (!r.exclude) {
    XTRAIN_USAGE_CHECK((r.sparsity >= 0) != (r.total_sparsity >= 0), "compress: ", where,
                       " needs exactly one of sparsity (per layer) or total_sparsity (global)");
    const double s = std::max(r.sparsity, r.total_sparsity);
    XTRAIN_USAGE_CHECK(s >= 0 && s < 1, "compress: ", where, ".sparsity must be in [0, 1), got ", s);
  }
  const std::vector<std::string> types = {"Linear", "Conv2d"};
  for (const auto& t : r.op_types) {
    XTRAIN_USAGE_CHECK(contains(types, t), "compress: ", where, ".op_types: \"", t,
                       "\" cannot be pruned (Linear, Conv2d)", did_you_mean_suffix(t, types));
  }
  for (const auto& n : r.op_names) {
    XTRAIN_USAGE_CHECK(contains(names, n), "compress: ", where, ".op_names: the model has no prunable layer \"", n,
                       "\"", did_you_mean_suffix(n, names));
  }
}

bool matches(const PruneRule& r, const Node& n) {
  const bool type_ok = r.op_types.empty() || contains(r.op_types, n.op_type);
  const bool name_ok = r.op_names.empty() || contains(r.op_names, n.name);
  return type_ok && name_ok;
}

}  // namespace

std::vector<PruneTarget> resolve_targets(const Graph& graph, const std::vector<PruneRule>& rules) {
  XTRAIN_USAGE_CHECK(!rules.empty(), "compress: pruning.config_list is empty");
  std::vector<std::string> names;
  for (const auto& n : graph.nodes) {
    if (n.kind == OpKind::kLinear || n.kind == OpKind::kConv2d) names.push_back(n.name);
  }
  for (size_t i = 0; i < rules.size(); ++i) check_rule(rules[i], i, names);
  std::vector<PruneTarget> out;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (n.kind != OpKind::kLinear && n.kind != OpKind::kConv2d) continue;
    int chosen = -1;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (matches(rules[r], n)) chosen = static_cast<int>(r);
    }
    if (chosen < 0 || rules[chosen].exclude) continue;
    // A tied LM head is the embedding table: pruning it would prune the embedding. Leave it.
    bool shared = false;
    for (const auto& m : graph.nodes) shared |= m.kind == OpKind::kEmbedTokens && m.weight.is_same(n.weight);
    if (shared) continue;
    const PruneRule& r = rules[chosen];
    PruneTarget t;
    t.node = static_cast<int>(i), t.name = n.name, t.weight = n.weight;
    t.sparsity = r.sparsity >= 0 ? r.sparsity : r.total_sparsity;
    t.group = r.total_sparsity >= 0 ? chosen : -1;
    out.push_back(std::move(t));
  }
  XTRAIN_USAGE_CHECK(!out.empty(), "compress: pruning.config_list selects no layer of this model (layers: ",
                     c10::Join(", ", names), ")");
  return out;
}

}  // namespace xtrain::compress
