#include "xtrain/plan/report.h"

#include <c10/util/StringUtil.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

namespace xtrain::plan {
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string bytes_text(double b) {
  if (b >= 1073741824.0) return fmt("%.2f GiB", b / 1073741824.0);
  if (b >= 1048576.0) return fmt("%.1f MiB", b / 1048576.0);
  return fmt("%.1f KiB", b / 1024.0);
}

std::string rate_text(double bytes_per_s) { return fmt("%.3g GB/s", bytes_per_s / 1e9) + fmt(" (%.3g Gbit/s)", bytes_per_s * 8 / 1e9); }

std::string count_text(double n) {
  if (n >= 1e9) return fmt("%.2fB", n / 1e9);
  if (n >= 1e6) return fmt("%.2fM", n / 1e6);
  return fmt("%.0f", n);
}

std::string ms(double s) { return fmt("%.2f", s * 1e3); }

std::string row(const Estimate& e) {
  const Layout& l = e.layout;
  char head[96];
  std::snprintf(head, sizeof head, "%-8s %4lld %3lld %3lld %4lld ", l.name.c_str(), (long long)l.dp, (long long)l.tp,
                (long long)l.pp, (long long)l.zero_stage);
  if (!e.possible) return std::string(head) + "   -  not possible: " + e.why_not;
  const Memory& m = e.memory;
  const StepTime& t = e.time;
  char body[320];
  std::snprintf(body, sizeof body, "%4lld | %10s %10s %10s %10s %11s %-4s | %9s %8s %8s %8s %9s %9s %9s | %10.0f",
                (long long)e.grad_accum, bytes_text(m.params).c_str(), bytes_text(m.grads).c_str(),
                bytes_text(m.master + m.optimizer).c_str(), bytes_text(m.activations).c_str(),
                bytes_text(m.total()).c_str(), e.fits ? "yes" : "NO", ms(t.compute).c_str(), ms(t.tp_comm).c_str(),
                ms(t.bubble).c_str(), ms(t.pp_comm).c_str(), ms(t.dp_comm).c_str(), ms(t.dp_exposed).c_str(),
                ms(t.total()).c_str(), e.tokens_per_s);
  return std::string(head) + body;
}

}  // namespace

std::vector<std::string> assumptions(const Cluster& c, const Training& t) {
  return {
      "compute: " + std::string(t.activation_checkpointing ? "8" : "6") +
          "·N FLOPs per token (forward 2N, backward 4N" + (t.activation_checkpointing ? ", recompute 2N" : "") +
          "; attention's T² term and the optimizer step left out) at " + fmt("%.4g", c.flops_per_s / 1e12) +
          " TFLOP/s achievable per rank, split evenly over tp x pp ranks",
      "collectives: rings in the alpha-beta model; all-reduce 2(p-1)/p·n·β + 2(p-1)α, reduce-scatter and "
      "all-gather (p-1)/p·n·β + (p-1)α, send α + n·β",
      "links: a group inside one node uses the intra-node link (" + rate_text(c.intra.bytes_per_s) + ", α " +
          fmt("%.3g us", c.intra.alpha_s * 1e6) + "), one spanning nodes runs every ring step at the inter-node link (" +
          rate_text(c.inter.bytes_per_s) + " per rank, α " + fmt("%.3g us", c.inter.alpha_s * 1e6) +
          "); ranks fill nodes in order, grid order tp-dp-pp (no hierarchical collectives, no contention)",
      "ZeRO: stage 0 all-reduces gradients at the accumulation boundary, 1 reduce-scatters them there, 2 "
      "reduce-scatters every micro-batch, 3 reduce-scatters and all-gathers parameters twice per micro-batch; "
      "stages 1-2 all-gather the updated parameters after the step",
      "overlap_comm " + std::string(t.overlap_comm ? "on" : "off") +
          (t.overlap_comm ? ": " + fmt("%.0f%%", t.overlap_fraction * 100) +
                                " of the gradient collectives that fit in backward (stage 3: the whole micro-batch) is hidden"
                          : ": every data-parallel collective is exposed"),
      "tensor parallel: Megatron's 4 all-reduces of b·s·h activations per layer and micro-batch (6 with "
      "recomputation), not overlapped; pipeline: 1F1B with the gradient accumulation steps as micro-batches, "
      "bubble (p-1) micro-batch slots, 2 activation sends per slot",
      "memory: model states from the ZeRO paper (" + std::to_string(t.param_bytes) + "-byte parameters and gradients, " +
          (t.param_bytes == 4 ? std::string("no separate master") : std::string("fp32 master 4 bytes")) + ", " +
          std::to_string(4 * t.state_floats) + " bytes of optimizer state per parameter), parameters split evenly "
          "over tp x pp; activations s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes per layer (Korthikanti et al. 2022, "
          "16-bit; scaled for fp32), pp micro-batches in flight on the first stage, fp32 logits and their gradient; "
          "no allocator fragmentation or framework overhead",
      "communication dtype: " + std::to_string(t.comm_bytes) + " bytes per gradient element on the wire",
  };
}

std::string format_text(const Plan& plan, const ModelShape& m, const Cluster& c, const Training& t) {
  std::ostringstream out;
  out << "model: GPT " << m.layers << " layers, d_model " << m.d_model << ", " << m.heads << " heads, vocab "
      << m.vocab << ", seq " << m.seq_len << ": " << count_text(double(plan.parameters)) << " parameters\n";
  out << "cluster: " << c.nodes << " nodes x " << c.gpus_per_node << " ranks = " << c.world() << "; "
      << bytes_text(c.memory_bytes) << " and " << fmt("%.4g", c.flops_per_s / 1e12) << " TFLOP/s per rank\n";
  out << "training: train_batch_size " << t.train_batch << ", micro batch " << t.micro_batch << ", "
      << (t.param_bytes == 2 ? "16-bit mixed precision" : "fp32") << ", zero stage " << t.zero_stage << "\n\n";
  out << "layout     dp  tp  pp zero  gas |     params      grads    optim+m activation  total/rank fits |"
         "  compute       tp   bubble       pp   dp comm  exposed   step ms |   tokens/s\n";
  out << "                                 |                                                            |"
         "       ms       ms       ms       ms        ms       ms           |\n";
  for (const Estimate& e : plan.estimates) out << row(e) << "\n";
  out << "\nrecommended: ";
  if (plan.recommended < 0) {
    out << "none: no possible layout fits in " << bytes_text(c.memory_bytes)
        << " per rank (more ranks, activation checkpointing or a smaller micro batch)\n";
  } else {
    const Estimate& e = plan.estimates[plan.recommended];
    out << e.layout.name << " (dp " << e.layout.dp << ", tp " << e.layout.tp << ", pp " << e.layout.pp << ", zero "
        << e.layout.zero_stage << "): " << ms(e.time.total()) << " ms/step, " << fmt("%.0f", e.tokens_per_s)
        << " tokens/s, " << bytes_text(e.memory.total()) << " per rank — fits and is fastest\n";
  }
  out << "\nassumptions:\n";
  for (const auto& a : assumptions(c, t)) out << "- " << a << "\n";
  return out.str();
}

std::string format_json(const Plan& plan, const ModelShape& m, const Cluster& c, const Training& t) {
  using nlohmann::json;
  json layouts = json::array();
  for (const Estimate& e : plan.estimates) {
    const Layout& l = e.layout;
    json j{{"name", l.name}, {"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"zero_stage", l.zero_stage},
           {"possible", e.possible}};
    if (!e.possible) {
      j["why_not"] = e.why_not;
    } else {
      const Memory& mm = e.memory;
      const StepTime& s = e.time;
      j["grad_accum"] = e.grad_accum;
      j["fits"] = e.fits;
      j["memory_bytes"] = {{"params", mm.params}, {"grads", mm.grads}, {"master", mm.master},
                           {"optimizer", mm.optimizer}, {"activations", mm.activations}, {"total", mm.total()}};
      j["time_s"] = {{"compute", s.compute}, {"tp_comm", s.tp_comm}, {"bubble", s.bubble}, {"pp_comm", s.pp_comm},
                     {"dp_comm", s.dp_comm}, {"dp_exposed", s.dp_exposed}, {"step", s.total()}};
      j["tokens_per_s"] = e.tokens_per_s;
    }
    layouts.push_back(j);
  }
  json out{{"model", {{"layers", m.layers}, {"d_model", m.d_model}, {"heads", m.heads}, {"vocab", m.vocab},
                      {"seq_len", m.seq_len}, {"tie_embeddings", m.tie_embeddings}, {"parameters", plan.parameters}}},
           {"cluster", {{"nodes", c.nodes}, {"gpus_per_node", c.gpus_per_node},
                        {"intra", {{"bytes_per_s", c.intra.bytes_per_s}, {"alpha_s", c.intra.alpha_s}}},
                        {"inter", {{"bytes_per_s", c.inter.bytes_per_s}, {"alpha_s", c.inter.alpha_s}}},
                        {"memory_bytes", c.memory_bytes}, {"flops_per_s", c.flops_per_s}}},
           {"training", {{"zero_stage", t.zero_stage}, {"micro_batch", t.micro_batch}, {"train_batch", t.train_batch},
                         {"param_bytes", t.param_bytes}, {"comm_bytes", t.comm_bytes},
                         {"overlap_comm", t.overlap_comm}, {"overlap_fraction", t.overlap_fraction},
                         {"activation_checkpointing", t.activation_checkpointing}}},
           {"layouts", layouts},
           {"recommended", plan.recommended < 0 ? json(nullptr) : json(plan.estimates[plan.recommended].layout.name)},
           {"assumptions", assumptions(c, t)}};
  return out.dump(2);
}

}  // namespace xtrain::plan
