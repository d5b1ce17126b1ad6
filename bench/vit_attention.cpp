// Benchmark (not a test): the Vision Transformer's attention cost against the patch count, dense
// vs 2-D multi-scale (docs/design/multiscale-attention-2d.md), and a whole ViT training step
// (forward + backward) at the same sizes. Each kernel output is first checked against the other
// where they coincide (windows covering the grid), then each grid runs dense and multi-scale side
// by side in this process; prints milliseconds (wall, median of --repeats) and the ratio.
//   bench_vit_attention [--grids 7,14,28] [--batch 8] [--d 96] [--heads 4] [--windows 2,4]
//                       [--layers 4] [--repeats 5]
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "xtrain/kernels/attention/registry.h"
#include "xtrain/models/vit.h"

namespace {

using xtrain::kernels::attention::run_attention_2d;
using xtrain::kernels::attention::select_attention_kernel;

std::vector<int64_t> ints(const char* s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

double median_ms(int repeats, const std::function<void()>& f) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Settings {
  std::vector<int64_t> grids = {7, 14, 28}, windows = {2, 4};
  int64_t batch = 8, d = 96, heads = 4, layers = 4;
  int repeats = 5;
};

double attention_ms(const Settings& s, int64_t g, const std::vector<int64_t>& windows) {
  const int64_t T = g * g + 1, HS = s.d / s.heads;
  auto q = at::randn({s.batch, s.heads, T, HS}).requires_grad_();
  auto k = at::randn({s.batch, s.heads, T, HS}).requires_grad_();
  auto v = at::randn({s.batch, s.heads, T, HS}).requires_grad_();
  return median_ms(s.repeats, [&] { run_attention_2d(q, k, v, windows, g, g, true, 0.0).sum().backward(); });
}

double vit_step_ms(const Settings& s, int64_t g, bool multiscale) {
  xtrain::models::ModelOptions o;
  o.type = "vit";
  o.d_model = s.d;
  o.heads = s.heads;
  o.layers = s.layers;
  o.num_classes = 10;
  o.args = {{"patch", 4}, {"mlp_ratio", 2}, {"image_size", 4 * g}};
  if (multiscale) {
    o.attention.type = "multiscale";
    o.attention.windows = s.windows;
  }
  xtrain::models::Vit model(o);
  const auto x = at::randn({s.batch, 1, 4 * g, 4 * g});
  return median_ms(s.repeats, [&] { model->forward(x).sum().backward(); });
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--grids") s.grids = ints(argv[i + 1]);
    else if (a == "--windows") s.windows = ints(argv[i + 1]);
    else if (a == "--batch") s.batch = std::stoll(argv[i + 1]);
    else if (a == "--d") s.d = std::stoll(argv[i + 1]);
    else if (a == "--heads") s.heads = std::stoll(argv[i + 1]);
    else if (a == "--layers") s.layers = std::stoll(argv[i + 1]);
    else if (a == "--repeats") s.repeats = std::stoi(argv[i + 1]);
  }
  // Check: windows covering a 5x5 grid make the multi-scale kernel dense.
  {
    auto q = at::randn({2, s.heads, 26, s.d / s.heads}), k = at::randn_like(q), v = at::randn_like(q);
    const std::vector<int64_t> wide(s.windows.size(), 10);
    const double err = (run_attention_2d(q, k, v, wide, 5, 5, true, 0.0) - run_attention_2d(q, k, v, {}, 5, 5, true, 0.0))
                           .abs().max().item<double>();
    std::printf("check: multi-scale with windows covering 5x5 vs dense, max |diff| %.2e %s\n", err,
                err < 1e-4 ? "ok" : "FAILED");
    if (err >= 1e-4) return 1;
  }
  std::printf("B=%ld d=%ld NH=%ld windows=", long(s.batch), long(s.d), long(s.heads));
  for (auto w : s.windows) std::printf("%ld ", long(w));
  std::printf("(class token; forward+backward, median of %d, wall ms)\n", s.repeats);
  std::printf("%6s %6s | %-16s %-16s %8s %9s | %10s %10s %6s\n", "grid", "T", "dense kernel", "ms kernel", "dense",
              "ms", "vit dense", "vit ms", "ratio");
  for (int64_t g : s.grids) {
    xtrain::kernels::attention::AttentionCall call;
    call.B = s.batch, call.NH = s.heads, call.T = g * g + 1, call.HS = s.d / s.heads, call.causal = false;
    call.grid_h = call.grid_w = g, call.cls_token = true;
    const auto dense_kernel = select_attention_kernel("auto", call);
    call.windows = s.windows;
    const auto ms_kernel = select_attention_kernel("auto", call);
    const double a_dense = attention_ms(s, g, {}), a_ms = attention_ms(s, g, s.windows);
    const double v_dense = vit_step_ms(s, g, false), v_ms = vit_step_ms(s, g, true);
    std::printf("%3ldx%-2ld %6ld | %-16s %-16s %8.2f %9.2f | %10.1f %10.1f %6.2f\n", long(g), long(g),
                long(g * g + 1), dense_kernel.c_str(), ms_kernel.c_str(), a_dense, a_ms, v_dense, v_ms, v_ms / v_dense);
    std::fflush(stdout);
  }
  return 0;
}
