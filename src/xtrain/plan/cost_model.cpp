#include "xtrain/plan/cost_model.h"

#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/topology/process_grid.h"
#include "xtrain/zero/memory_estimate.h"

namespace xtrain::plan {

int64_t parameter_count(const ModelShape& m) {
  const int64_t C = m.d_model;
  const int64_t head = m.tie_embeddings ? 0 : m.vocab * C;
  return m.vocab * C + m.seq_len * C + m.layers * (12 * C * C + 13 * C) + 2 * C + head;
}

double all_reduce_s(double bytes, int64_t p, const Link& link) {
  if (p <= 1) return 0;
  return 2.0 * (p - 1) / p * bytes / link.bytes_per_s + 2.0 * (p - 1) * link.alpha_s;
}

double reduce_scatter_s(double bytes, int64_t p, const Link& link) {
  if (p <= 1) return 0;
  return double(p - 1) / p * bytes / link.bytes_per_s + double(p - 1) * link.alpha_s;
}

double all_gather_s(double bytes, int64_t p, const Link& link) { return reduce_scatter_s(bytes, p, link); }

double send_s(double bytes, const Link& link) { return link.alpha_s + bytes / link.bytes_per_s; }

namespace {

// The link a group's ring runs at: the inter-node one as soon as the group leaves rank 0's node
// (ranks fill nodes in order; grid order tp-dp-pp, so tensor-parallel peers are neighbours).
Link group_link(const topology::ProcessGrid& grid, topology::Axis axis, const Cluster& c) {
  for (int64_t r : grid.group(axis, 0)) {
    if (r / c.gpus_per_node != 0) return c.inter;
  }
  return c.intra;
}

void check_layout(const Layout& l, const ModelShape& m, const Cluster& c) {
  if (l.tp < 1 || l.pp < 1 || l.dp < 1) XTRAIN_USAGE_ERROR("plan: layout ", l.name, " has a degree < 1");
  if (m.heads % l.tp != 0) {
    XTRAIN_USAGE_ERROR("plan: tensor-parallel degree ", l.tp, " does not divide heads ", m.heads,
                       " (xtrain.model.heads); choose --tp among the divisors of ", m.heads);
  }
  if (m.layers % l.pp != 0) {
    XTRAIN_USAGE_ERROR("plan: pipeline degree ", l.pp, " does not divide layers ", m.layers,
                       " (xtrain.model.layers); choose --pp among the divisors of ", m.layers);
  }
  if (l.dp * l.tp * l.pp != c.world()) {
    XTRAIN_USAGE_ERROR("plan: layout ", l.name, " uses dp ", l.dp, " x tp ", l.tp, " x pp ", l.pp, " = ",
                       l.dp * l.tp * l.pp, " ranks but the cluster has ", c.world(), " (--nodes ", c.nodes,
                       " x --gpus-per-node ", c.gpus_per_node, "); tp x pp must divide ", c.world());
  }
}

// Korthikanti et al. 2022 (eq. 2, tensor parallel, no sequence parallel): bytes of one layer's
// activations for one micro-batch with 16-bit activations, s·b·h·(10 + 24/t + 5·a·s/(h·t)).
double layer_activation_bytes(const ModelShape& m, const Training& t, int64_t tp) {
  const double sbh = double(m.seq_len) * t.micro_batch * m.d_model;
  const double per = 10.0 + 24.0 / tp + 5.0 * m.heads * m.seq_len / (double(m.d_model) * tp);
  return sbh * per * (t.param_bytes / 2.0);
}

Memory memory_of(const Layout& l, const ModelShape& m, const Training& t, int64_t grad_accum) {
  const int64_t psi = parameter_count(m) / (l.tp * l.pp);
  const auto ms = zero::estimate_memory(l.zero_stage, psi, l.dp, t.param_bytes, t.state_floats);
  Memory mem;
  mem.params = double(ms.param_bytes);
  mem.grads = double(ms.grad_bytes);
  mem.master = double(ms.master_bytes);
  mem.optimizer = double(ms.optimizer_bytes);
  const int64_t layers = m.layers / l.pp;
  const int64_t in_flight = l.pp > 1 ? std::min(l.pp, grad_accum) : 1;  // 1F1B: first stage holds pp
  const double full = layer_activation_bytes(m, t, l.tp);
  const double sbh = double(m.seq_len) * t.micro_batch * m.d_model;
  // Checkpointing keeps each layer's input and recomputes one layer at a time.
  const double per_micro = t.activation_checkpointing ? layers * sbh * t.param_bytes + full : layers * full;
  const double logits = double(m.seq_len) * t.micro_batch * m.vocab * 8.0 / l.tp;  // fp32 logits + grad
  mem.activations = in_flight * per_micro + logits;
  return mem;
}

// Data-parallel (ZeRO) collectives of one step, and the part hidden behind backward.
void dp_time(StepTime& st, const Layout& l, int64_t psi, const Training& t, const Link& link, int64_t gas,
             double micro_compute) {
  const double nc = double(psi) * t.comm_bytes, np = double(psi) * t.param_bytes;
  double boundary = 0, per_micro = 0, after = 0;
  switch (l.zero_stage) {
    case 0: boundary = all_reduce_s(nc, l.dp, link); break;                   // buckets at the boundary
    case 1: boundary = reduce_scatter_s(nc, l.dp, link); after = all_gather_s(np, l.dp, link); break;
    case 2: per_micro = reduce_scatter_s(nc, l.dp, link); after = all_gather_s(np, l.dp, link); break;
    default: per_micro = reduce_scatter_s(nc, l.dp, link) + 2 * all_gather_s(np, l.dp, link); break;
  }
  st.dp_comm = boundary + gas * per_micro + after;
  double hidden = 0;
  if (t.overlap_comm) {
    const double backward = micro_compute * (t.activation_checkpointing ? 6.0 / 8.0 : 4.0 / 6.0);
    const double window = l.zero_stage >= 3 ? micro_compute : backward;  // stage 3 prefetches forward too
    hidden = t.overlap_fraction * (std::min(boundary, backward) + gas * std::min(per_micro, window));
  }
  st.dp_exposed = st.dp_comm - hidden;
}

}  // namespace

Estimate estimate(const Layout& layout, const ModelShape& m, const Cluster& c, const Training& t) {
  check_layout(layout, m, c);
  Estimate e;
  e.layout = layout;
  const int64_t per_step = t.micro_batch * layout.dp;
  if (t.train_batch % per_step != 0) {
    e.possible = false;
    e.why_not = c10::str("train_batch_size ", t.train_batch, " is not a multiple of micro batch ", t.micro_batch,
                         " x dp ", layout.dp, t.train_batch < per_step ? ": more ranks than samples" : "");
    return e;
  }
  e.grad_accum = t.train_batch / per_step;
  e.memory = memory_of(layout, m, t, e.grad_accum);
  e.fits = e.memory.total() <= c.memory_bytes;

  const topology::ProcessGrid grid(c.world(), layout.tp, layout.pp);
  const int64_t psi = parameter_count(m) / (layout.tp * layout.pp);
  const double flops_per_token = (t.activation_checkpointing ? 8.0 : 6.0) * parameter_count(m);
  const double tokens_micro = double(t.micro_batch) * m.seq_len;
  const double micro_compute = flops_per_token * tokens_micro / (layout.tp * layout.pp * c.flops_per_s);
  const double act_bytes = tokens_micro * m.d_model * t.param_bytes;  // one b·s·h activation
  const int64_t tp_calls = (t.activation_checkpointing ? 6 : 4) * (m.layers / layout.pp);  // Megatron f/g
  const double micro_tp = tp_calls * all_reduce_s(act_bytes, layout.tp, group_link(grid, topology::Axis::kTensor, c));

  StepTime& st = e.time;
  st.compute = e.grad_accum * micro_compute;
  st.tp_comm = e.grad_accum * micro_tp;
  st.bubble = (layout.pp - 1) * (micro_compute + micro_tp);
  if (layout.pp > 1) {
    const Link pl = group_link(grid, topology::Axis::kPipeline, c);
    st.pp_comm = 2.0 * (e.grad_accum + layout.pp - 1) * send_s(act_bytes, pl);
  }
  dp_time(st, layout, psi, t, group_link(grid, topology::Axis::kData, c), e.grad_accum, micro_compute);
  e.tokens_per_s = double(t.train_batch) * m.seq_len / st.total();
  return e;
}

namespace {

int64_t chosen_tp(const ModelShape& m, const Cluster& c) {
  for (int64_t t = c.gpus_per_node; t > 1; --t) {
    if (c.gpus_per_node % t == 0 && m.heads % t == 0) return t;
  }
  return 0;
}

// Smallest pipeline degree (> 1) that divides layers and `ranks` and fits; else the largest valid one.
int64_t chosen_pp(const ModelShape& m, const Cluster& c, const Training& t, int64_t tp, int64_t stage) {
  const int64_t ranks = c.world() / tp;
  int64_t last = 0;
  for (int64_t p = 2; p <= ranks; ++p) {
    if (ranks % p != 0 || m.layers % p != 0) continue;
    last = p;
    const Estimate e = estimate({"", ranks / p, tp, p, stage}, m, c, t);
    if (e.possible && e.fits) return p;
  }
  return last;
}

Estimate impossible(const Layout& l, const std::string& why) {
  Estimate e;
  e.layout = l;
  e.possible = false;
  e.why_not = why;
  return e;
}

}  // namespace

Plan make_plan(const ModelShape& m, const Cluster& c, const Training& t, int64_t tp, int64_t pp) {
  if (c.world() < 1) XTRAIN_USAGE_ERROR("plan: --nodes and --gpus-per-node must be >= 1");
  Plan plan;
  plan.parameters = parameter_count(m);
  const int64_t w = c.world();
  plan.estimates.push_back(estimate({"DP", w, 1, 1, 0}, m, c, t));
  for (int64_t s = 1; s <= 3; ++s) plan.estimates.push_back(estimate({"ZeRO-" + std::to_string(s), w, 1, 1, s}, m, c, t));
  const int64_t pp_stage = std::min<int64_t>(t.zero_stage, 1);  // DeepSpeed's pipeline engine: stage <= 1
  const int64_t tp_stage = std::min<int64_t>(t.zero_stage, 2);  // xtrain's tensor parallelism: stage <= 2
  const int64_t t_deg = tp > 0 ? tp : chosen_tp(m, c);
  if (t_deg > 1 || tp > 0) {
    plan.estimates.push_back(estimate({"TP x DP", w / std::max<int64_t>(t_deg, 1), t_deg, 1, tp_stage}, m, c, t));
  } else {
    plan.estimates.push_back(impossible({"TP x DP", 0, 0, 1, tp_stage},
                                        "no degree > 1 divides both heads and --gpus-per-node (TP stays in a node; --tp sets one)"));
  }
  const int64_t p_deg = pp > 0 ? pp : chosen_pp(m, c, t, 1, pp_stage);
  if (p_deg > 0) {
    plan.estimates.push_back(estimate({"PP x DP", w / p_deg, 1, p_deg, pp_stage}, m, c, t));
  } else {
    plan.estimates.push_back(impossible({"PP x DP", 0, 1, 0, pp_stage}, "no degree > 1 divides both layers and the ranks"));
  }
  const int64_t p3 = t_deg > 1 ? (pp > 0 ? pp : chosen_pp(m, c, t, t_deg, pp_stage)) : 0;
  if (t_deg > 1 && p3 > 0 && (pp > 0 || w % (t_deg * p3) == 0)) {
    plan.estimates.push_back(estimate({"3D", w / (t_deg * p3), t_deg, p3, pp_stage}, m, c, t));
  } else {
    plan.estimates.push_back(impossible({"3D", 0, t_deg, p3, pp_stage}, "needs a tensor- and a pipeline-parallel degree > 1"));
  }
  for (size_t i = 0; i < plan.estimates.size(); ++i) {
    const Estimate& e = plan.estimates[i];
    if (!e.possible || !e.fits) continue;
    if (plan.recommended < 0 || e.time.total() < plan.estimates[plan.recommended].time.total()) plan.recommended = int(i);
  }
  return plan;
}

}  // namespace xtrain::plan
