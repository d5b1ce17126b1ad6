// The scaling model behind `xtrain plan`: for a GPT shape, a cluster and a training setup, the
// memory per rank and the step time of each layout (DP, ZeRO-1/2/3, TP x DP, PP x DP, 3D), and the
// layout to use. Pure arithmetic. Memory: the ZeRO paper's model-state formulas (zero/memory_estimate.h)
// plus Korthikanti et al. 2022's activation formula; time: compute 6·N·tokens / achievable FLOP/s plus
// alpha-beta ring collectives (Thakur, Rabenseifner & Gropp 2005), a stated overlap fraction, and the
// pipeline bubble (p-1)/(m+p-1). Every assumption is listed by report.h's assumptions() and printed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::plan {

struct ModelShape {       // a GPT as models/gpt.h builds it (pre-LN blocks, 4C MLP, biases)
  int64_t layers = 4;     // L
  int64_t d_model = 256;  // C
  int64_t heads = 4;      // NH
  int64_t vocab = 256;    // V
  int64_t seq_len = 256;  // T
  bool tie_embeddings = true;
};

// wte V·C + wpe T·C + L·(12C² + 13C) + final LayerNorm 2C (+ an untied head V·C).
int64_t parameter_count(const ModelShape& m);

struct Link {
  double bytes_per_s = 0;  // bandwidth of one rank's path (β = 1 / bytes_per_s)
  double alpha_s = 0;      // latency per message
};

struct Cluster {
  int64_t nodes = 1, gpus_per_node = 1;
  Link intra, inter;         // inside a node; between nodes (per rank: a ring's slowest hop)
  double memory_bytes = 0;   // per rank
  double flops_per_s = 0;    // achievable per rank (peak × efficiency), for 6·N·tokens
  int64_t world() const { return nodes * gpus_per_node; }
};

struct Training {
  int64_t zero_stage = 0;      // the TP x DP layout's (at most 2), the PP and 3D layouts' (at most 1)
  int64_t micro_batch = 1;     // train_micro_batch_size_per_gpu
  int64_t train_batch = 1;     // train_batch_size: global samples per step, kept for every layout
  int64_t param_bytes = 4;     // 2 with bf16/fp16 (mixed precision: fp32 master kept), 4 fp32
  int64_t comm_bytes = 4;      // gradient bytes on the wire (communication_data_type, else param_bytes)
  int64_t state_floats = 2;    // optimizer state per parameter, fp32 (Adam: 2)
  bool overlap_comm = false;   // zero_optimization.overlap_comm
  double overlap_fraction = 0.5;  // share of overlappable communication hidden behind backward
  bool activation_checkpointing = false;
};

// Alpha-beta ring collectives over p ranks of n bytes each (p = 1: free).
double all_reduce_s(double bytes, int64_t p, const Link& link);      // 2(p-1)/p·n·β + 2(p-1)α
double reduce_scatter_s(double bytes, int64_t p, const Link& link);  // (p-1)/p·n·β + (p-1)α
double all_gather_s(double bytes, int64_t p, const Link& link);      // (p-1)/p·n·β + (p-1)α (n: the whole)
double send_s(double bytes, const Link& link);                        // α + n·β

struct Layout {
  std::string name;  // "DP", "ZeRO-2", "TP x DP", ...
  int64_t dp = 1, tp = 1, pp = 1, zero_stage = 0;
};

struct Memory {  // bytes per rank
  double params = 0, grads = 0, master = 0, optimizer = 0, activations = 0;
  double total() const { return params + grads + master + optimizer + activations; }
};

struct StepTime {  // seconds per optimizer step
  double compute = 0;      // 6·N·tokens (8·N with activation checkpointing) / (tp·pp·FLOP/s)
  double tp_comm = 0;      // tensor-parallel all-reduces, on the critical path
  double bubble = 0;       // pipeline fill and drain: (p-1) micro-batch slots
  double pp_comm = 0;      // activation sends between stages
  double dp_comm = 0;      // data-parallel (ZeRO) collectives in total
  double dp_exposed = 0;   // the part of dp_comm not hidden behind backward
  double total() const { return compute + tp_comm + bubble + pp_comm + dp_exposed; }
};

struct Estimate {
  Layout layout;
  bool possible = true;
  std::string why_not;     // when !possible
  int64_t grad_accum = 0;  // micro-batches per step on each data-parallel rank
  Memory memory;
  StepTime time;
  bool fits = false;       // memory.total() <= cluster.memory_bytes
  double tokens_per_s = 0;
};

// One layout's numbers (possible = false, with the reason, when the batch cannot be split over it).
// UsageError when the layout itself is impossible for the model or cluster (tp not dividing heads ...).
Estimate estimate(const Layout& layout, const ModelShape& m, const Cluster& c, const Training& t);

struct Plan {
  int64_t parameters = 0;
  std::vector<Estimate> estimates;
  int recommended = -1;  // index into estimates: fits and is fastest; -1 when none fits
};

// `tp`, `pp` (0: chosen): the degrees of the TP x DP, PP x DP and 3D layouts. Chosen: tp the largest
// divisor of heads and of gpus_per_node (TP stays inside a node), pp the smallest divisor of layers
// and of the ranks left that makes the layout fit (else the largest tried).
Plan make_plan(const ModelShape& m, const Cluster& c, const Training& t, int64_t tp = 0, int64_t pp = 0);

}  // namespace xtrain::plan
