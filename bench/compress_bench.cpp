// Benchmark (not a test): the issue-9 goals on Fashion-MNIST and the default GPT. Trains an MLP
// (784-512-256-10) briefly, then measures validation accuracy, deployable weight size and latency
// of: static INT8 PTQ (minmax / percentile / entropy), QAT, 80% / 90% unstructured pruning and 50%
// structured channel pruning (each fine-tuned), and distillation (a 64-unit student with and
// without the teacher). Then latency only (untrained weights) for ResNet-18 and the default GPT,
// fp32 against int8, and ONNX Runtime's latency of the exported models (node, onnxruntime-node)
// next to xtrain's. Checks first that the int8 GEMM equals its exact integer reference.
// The default GPT is trained briefly on Moby Dick (--gpt-steps) for its perplexity before/after.
// --resnet-steps N also trains ResNet-18 (batch 64) and compares fp32 / int8 accuracy on 2000 val images.
//   bench_compress_bench [--steps 1500] [--finetune 300] [--gpt-steps 200] [--resnet-steps 0] [--threads 1]
//                        [--distill-subset 1000] [--skip-ort]
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "xtrain/compress/distill/distillation.h"
#include "xtrain/compress/graph/executor.h"
#include "xtrain/compress/pipeline.h"
#include "xtrain/compress/prune/magnitude.h"
#include "xtrain/compress/quant/int8_gemm.h"
#include "xtrain/data/dataset.h"
#include "xtrain/data/options.h"
#include "xtrain/data/sampler.h"
#include "xtrain/export/onnx/onnx_export.h"
#include "xtrain/models/factory.h"

namespace {

using namespace xtrain;
namespace c = xtrain::compress;

struct Args {
  int64_t steps = 1500, finetune = 300, threads = 1, gpt_steps = 200, resnet_steps = 0, distill_subset = 1000;
  bool ort = true;
};

struct Data {
  data::Splits splits;
  at::Tensor val_x, val_y;  // the whole validation split
  std::shared_ptr<data::DistributedSampler> sampler;
  data::Batch next(int64_t micro = 64) { return splits.train->collate(sampler->next(micro)); }
};

double accuracy(const models::Model& m, const Data& d) {
  at::NoGradGuard no_grad;
  m.module->eval();
  int64_t correct = 0;
  for (int64_t i = 0; i < d.val_x.size(0); i += 1000) {
    const auto x = d.val_x.narrow(0, i, std::min<int64_t>(1000, d.val_x.size(0) - i));
    correct += m.forward(x).argmax(1).eq(d.val_y.narrow(0, i, x.size(0))).sum().item<int64_t>();
  }
  return 100.0 * correct / d.val_x.size(0);
}

c::CompressHooks hooks(Data& d) {
  c::CompressHooks h;
  h.train_batch = [&d](int64_t) { return d.next(); };
  h.calibration_input = [&d](int64_t i) { return d.val_x.narrow(0, 0, 2000).narrow(0, (i * 64) % 1936, 64); };
  h.loss = [](const at::Tensor& logits, const at::Tensor& y) { return at::cross_entropy_loss(logits, y); };
  h.evaluate = [&d](const models::Model& m) { return std::make_pair(0.0, accuracy(m, d) / 100.0); };
  h.latency_input = d.val_x.narrow(0, 0, 256);
  h.default_lr = 1e-3;
  h.hints.sample_shape = {1, 28, 28};
  return h;
}

models::Model mlp(std::vector<int64_t> hidden) {
  models::ModelOptions o;
  o.type = "mlp", o.in_features = 784, o.hidden = std::move(hidden), o.num_classes = 10;
  at::manual_seed(1);
  return models::build_model(o);
}

void train(const models::Model& m, int64_t steps, double lr, const c::CompressHooks& h) {
  c::fine_tune(m, steps, lr, h, [&](const data::Batch& b) { return h.loss(m.forward(b.input), b.target); });
}

void copy_weights(const models::Model& from, const models::Model& to) {
  at::NoGradGuard no_grad;
  auto dst = to.module->named_parameters();
  for (const auto& p : from.module->named_parameters()) dst[p.key()].set_data(p.value().detach().clone());
}

void row(const char* what, const c::ModelStats& base, const c::ModelStats& s) {
  std::printf("| %-34s | %6.2f%% | %+6.2f | %8.3f MB (%.3fx) | %5.1f%% | %7.3f ms (%.2fx) |\n", what, 100 * s.accuracy,
              100 * (s.accuracy - base.accuracy), s.bytes / 1e6, double(s.bytes) / base.bytes, 100 * s.sparsity,
              s.latency_ms, base.latency_ms / s.latency_ms);
}

bool check_gemm() {
  at::manual_seed(0);
  const auto A = at::randint(0, 256, {37, 260}, at::kByte);
  const auto W = at::randint(-128, 128, {70, 257}, at::kChar);
  const auto ref = at::mm(A.narrow(1, 0, 257).to(at::kLong), W.to(at::kLong).t()).to(at::kInt);
  return at::equal(c::int8_gemm_accumulators(A, c::pack_int8_weight(W)), ref);
}

double ort_latency(const c::Graph& g, const c::QuantPlan* plan, const at::Tensor& x, const std::string& tag) {
  const std::string dir = "/tmp/xtrain_compress_bench";
  std::filesystem::create_directories(dir);
  onnx_export::ExportOptions o;
  o.int8 = plan != nullptr;
  const auto r = onnx_export::export_onnx(g, plan, dir + "/" + tag + ".onnx", o);
  const auto xc = x.contiguous();
  std::ofstream(dir + "/in.bin", std::ios::binary)
      .write(static_cast<const char*>(xc.data_ptr()), xc.numel() * xc.element_size());
  std::string dims;
  for (auto d : xc.sizes()) dims += (dims.empty() ? "" : ",") + std::to_string(d);
  std::ofstream(dir + "/spec.json") << "{\"model\":\"" << r.path << "\",\"input\":{\"name\":\"" << r.input_name
                                    << "\",\"file\":\"" << dir << "/in.bin\",\"dtype\":\""
                                    << (xc.scalar_type() == at::kLong ? "int64" : "float32") << "\",\"dims\":[" << dims
                                    << "]},\"output\":{\"name\":\"" << r.output_name << "\",\"file\":\"" << dir
                                    << "/out.bin\"},\"repeats\":20,\"threads\":" << at::get_num_threads() << "}";
  // The runner beside the tests: bench/ and tests/ are siblings in the source tree.
  const auto run_js = std::filesystem::path(__FILE__).parent_path().parent_path() / "tests/export/ort/run.js";
  const std::string cmd = "node " + run_js.string() + " " + dir + "/spec.json > " + dir + "/ort.json";
  if (std::system(cmd.c_str()) != 0) return -1;
  std::ifstream in(dir + "/ort.json");
  std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto pos = line.find("\"latency_ms\":");
  return pos == std::string::npos ? -1 : std::atof(line.c_str() + pos + 13);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) a.steps = std::atol(argv[++i]);
    if (!std::strcmp(argv[i], "--finetune") && i + 1 < argc) a.finetune = std::atol(argv[++i]);
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) a.threads = std::atol(argv[++i]);
    if (!std::strcmp(argv[i], "--gpt-steps") && i + 1 < argc) a.gpt_steps = std::atol(argv[++i]);
    if (!std::strcmp(argv[i], "--resnet-steps") && i + 1 < argc) a.resnet_steps = std::atol(argv[++i]);
    if (!std::strcmp(argv[i], "--distill-subset") && i + 1 < argc) a.distill_subset = std::atol(argv[++i]);
    if (!std::strcmp(argv[i], "--skip-ort")) a.ort = false;
  }
  return a;
}

// Fashion-MNIST: both splits, the whole validation split as tensors, a training sampler.
Data open_fashion_mnist() {
  data::DataOptions dopt;
  dopt.type = "fashion_mnist";
  Data d;
  d.splits = data::open_datasets(dopt, 0, data::default_cache_dir());
  std::vector<int64_t> all(d.splits.val->size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const auto val = d.splits.val->collate(all);
  d.val_x = val.input, d.val_y = val.target;
  d.sampler = std::make_shared<data::DistributedSampler>(d.splits.train->size(), 1, 0, 1);
  return d;
}

// The fine-tuned fp32 reference and the int8 rows (static PTQ per observer, dynamic, QAT).
void quant_rows(const Args& a, const models::Model& base, const c::ModelStats& fp32, const c::CompressHooks& h) {
  {
    // The fair reference for every fine-tuned row: the same dense model trained the same extra steps.
    auto m = mlp({512, 256});
    copy_weights(base, m);
    train(m, a.finetune, 1e-4, h);
    row("fp32 + the same fine-tune steps", fp32, c::measure("fp32 ft", m, c::trace(*m.module, h.hints), nullptr, h, 20));
  }
  for (const char* obs : {"minmax", "percentile", "entropy"}) {
    auto m = mlp({512, 256});
    copy_weights(base, m);
    c::CompressOptions o;
    o.quantization.enabled = true, o.quantization.quant.observer = obs, o.quantization.calibration_batches = 16;
    o.evaluation.latency_repeats = 20;
    const auto r = c::compress_model(m, o, h);
    row((std::string("int8 static PTQ, ") + obs).c_str(), fp32, r.stats.back());
  }
  {
    auto m = mlp({512, 256});
    copy_weights(base, m);
    c::CompressOptions o;
    o.quantization.enabled = true, o.quantization.quant.mode = "dynamic";
    o.evaluation.latency_repeats = 20;
    row("int8 dynamic", fp32, c::compress_model(m, o, h).stats.back());
  }
  {
    auto m = mlp({512, 256});
    copy_weights(base, m);
    c::CompressOptions o;
    o.quantization.enabled = true, o.quantization.quant.mode = "qat", o.quantization.qat.steps = a.finetune;
    o.quantization.qat.lr = 1e-4;
    o.evaluation.latency_repeats = 20;
    row("int8 QAT (fine-tuned)", fp32, c::compress_model(m, o, h).stats.back());
  }
  {
    // Where PTQ loses accuracy (the entropy observer's clipping), QAT with the same observer.
    auto m = mlp({512, 256});
    copy_weights(base, m);
    c::CompressOptions o;
    o.quantization.enabled = true, o.quantization.quant.mode = "qat", o.quantization.quant.observer = "entropy";
    o.quantization.qat.steps = a.finetune, o.quantization.qat.lr = 1e-4;
    o.evaluation.latency_repeats = 20;
    row("int8 QAT, entropy observer", fp32, c::compress_model(m, o, h).stats.back());
  }
}

// Unstructured (one-shot and gradual) and structured channel pruning, each fine-tuned.
void prune_rows(const Args& a, const models::Model& base, const c::ModelStats& fp32, const c::CompressHooks& h) {
  for (double s : {0.8, 0.9}) {
    auto m = mlp({512, 256});
    copy_weights(base, m);
    c::CompressOptions o;
    o.pruning.enabled = true;
    c::PruneRule r;
    r.sparsity = s, r.op_types = {"Linear"};
    o.pruning.config_list = {r};
    o.pruning.finetune.steps = a.finetune, o.pruning.finetune.lr = 1e-4;
    o.evaluation.latency_repeats = 20;
    row(s == 0.8 ? "80% unstructured + fine-tune" : "90% unstructured + fine-tune", fp32,
        c::compress_model(m, o, h).stats.back());
  }
  {
    // 90% gradually (Zhu & Gupta): the cubic ramp over the first 3/4 of 3x the fine-tuning steps.
    auto m = mlp({512, 256});
    copy_weights(base, m);
    c::CompressOptions o;
    o.pruning.enabled = true, o.pruning.gradual = true;
    c::PruneRule r;
    r.sparsity = 0.9, r.op_types = {"Linear"};
    o.pruning.config_list = {r};
    o.pruning.finetune.steps = 3 * a.finetune, o.pruning.finetune.lr = 3e-4;
    o.pruning.start_step = 0, o.pruning.end_step = o.pruning.finetune.steps * 3 / 4, o.pruning.frequency = 10;
    o.evaluation.latency_repeats = 20;
    row("90% unstructured, AGP, 3x steps", fp32, c::compress_model(m, o, h).stats.back());
  }
  {
    auto m = mlp({512, 256});
    copy_weights(base, m);
    c::CompressOptions o;
    o.pruning.enabled = true, o.pruning.method = "l1";
    c::PruneRule r;
    r.sparsity = 0.5, r.op_types = {"Linear"};
    o.pruning.config_list = {r};
    o.pruning.finetune.steps = a.finetune, o.pruning.finetune.lr = 1e-4;
    o.evaluation.latency_repeats = 20;
    row("50% channels (L1) + fine-tune", fp32, c::compress_model(m, o, h).stats.back());
  }
}

// The 784-64-10 student alone and distilled, on all labels and on a subset.
void distil_rows(const Args& a, const models::Model& base, const c::ModelStats& fp32, const c::CompressHooks& h,
                 Data& d) {
  // The 784-64-10 student trained alone and distilled from `base`, the same steps on the same data.
  const auto distil = [&](const c::CompressHooks& hooks, const std::string& label) {
    auto alone = mlp({64});
    train(alone, a.steps, 1e-3, hooks);
    const auto s_alone = c::measure("student alone", alone, c::trace(*alone.module, hooks.hints), nullptr, hooks, 20);
    c::CompressOptions o;
    o.distillation.enabled = true, o.distillation.train.steps = a.steps, o.distillation.train.lr = 1e-3;
    o.distillation.loss.temperature = 4.0, o.distillation.loss.alpha = 0.7;
    o.evaluation.latency_repeats = 20;
    auto hd = hooks;
    hd.build_student = [] { return mlp({64}); };
    const auto r = c::compress_model(base, o, hd);
    row(("student 784-64-10 alone" + label).c_str(), fp32, s_alone);
    row(("student 784-64-10 distilled" + label).c_str(), fp32, r.stats.back());
    std::printf("distillation gain%s: %+.2f points\n", label.c_str(), 100 * (r.stats.back().accuracy - s_alone.accuracy));
  };
  distil(h, "");
  if (a.distill_subset > 0) {
    // Hinton's limited-data case: the student sees only the first N labelled training images (the
    // teacher was trained on all of them).
    auto subset = std::make_shared<data::DistributedSampler>(a.distill_subset, 2, 0, 1);
    auto hs = h;
    hs.train_batch = [&d, subset](int64_t) { return d.splits.train->collate(subset->next(64)); };
    distil(hs, ", " + std::to_string(a.distill_subset) + " labels");
  }
}

// ---- MLP on Fashion-MNIST: trained, then every compression; returns the trained base.
models::Model mlp_section(const Args& a, Data& d, const c::CompressHooks& h) {
  auto base = mlp({512, 256});
  train(base, a.steps, 1e-3, h);
  const auto g0 = c::trace(*base.module, h.hints);
  const auto fp32 = c::measure("fp32", base, g0, nullptr, h, 20);
  std::printf("\nMLP 784-512-256-10, Fashion-MNIST, %lld steps of 64, %lld thread(s); latency: batch 256\n",
              (long long)a.steps, (long long)a.threads);
  std::printf("| %-34s | acc     | pts    | weights               | sparse | latency            |\n", "model");
  row("fp32", fp32, fp32);
  quant_rows(a, base, fp32, h);
  prune_rows(a, base, fp32, h);
  distil_rows(a, base, fp32, h, d);
  return base;
}

void resnet_section(const Args& a, const Data& d) {
  // ---- ResNet-18 on Fashion-MNIST, briefly trained: accuracy fp32 vs static int8
  if (a.resnet_steps > 0) {
    models::ModelOptions o;
    o.type = "resnet18", o.num_classes = 10;
    at::manual_seed(1);
    auto r18 = models::build_model(o);
    Data sub = d;
    sub.val_x = d.val_x.narrow(0, 0, 2000), sub.val_y = d.val_y.narrow(0, 0, 2000);
    auto hr = hooks(sub);
    hr.latency_input = d.val_x.narrow(0, 0, 32);
    train(r18, a.resnet_steps, 1e-3, hr);
    std::printf("\nResNet-18, Fashion-MNIST, %lld steps of 64; accuracy on 2000 val images; latency: batch 32\n",
                (long long)a.resnet_steps);
    for (const char* obs : {"minmax", "percentile"}) {
      c::CompressOptions co;
      co.quantization.enabled = true, co.quantization.quant.observer = obs, co.quantization.calibration_batches = 16;
      co.evaluation.latency_repeats = 5;
      const auto r = c::compress_model(r18, co, hr);
      if (std::string(obs) == "minmax") row("ResNet-18 fp32", r.stats.front(), r.stats.front());
      row((std::string("ResNet-18 int8 static, ") + obs).c_str(), r.stats.front(), r.stats.back());
    }
  }
}

void gpt_section(const Args& a) {
  // ---- the default GPT on Moby Dick, briefly trained: perplexity fp32 vs int8 (static, dynamic)
  if (a.gpt_steps > 0) {
    data::DataOptions t;  // text, mobydick
    auto splits = data::open_datasets(t, 256, data::default_cache_dir());
    auto sampler = std::make_shared<data::DistributedSampler>(splits.train->size(), 1, 0, 1);
    auto val_sampler = std::make_shared<data::DistributedSampler>(splits.val->size(), 2, 0, 1);
    std::vector<data::Batch> val;
    for (int i = 0; i < 16; ++i) val.push_back(splits.val->collate(val_sampler->next(8)));
    models::ModelOptions o;
    at::manual_seed(1);
    auto gpt = models::build_model(o);
    c::CompressHooks g;
    g.train_batch = [&](int64_t) { return splits.train->collate(sampler->next(8)); };
    g.calibration_input = [&](int64_t i) { return splits.train->collate(sampler->next(8)).input; };
    g.loss = [](const at::Tensor& logits, const at::Tensor& y) {
      return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
    };
    g.evaluate = [&](const models::Model& m) {
      at::NoGradGuard no_grad;
      double sum = 0;
      for (const auto& b : val) sum += at::cross_entropy_loss(m.forward(b.input).reshape({-1, 256}), b.target.reshape({-1})).item<double>();
      return std::make_pair(sum / val.size(), -1.0);
    };
    g.latency_input = val[0].input;
    c::fine_tune(gpt, a.gpt_steps, 1e-3, g, [&](const data::Batch& b) { return g.loss(gpt.forward(b.input), b.target); });
    std::printf("\nDefault GPT (4 x 256, 4 heads, T 256, bytes), Moby Dick, %lld steps of 8 x 256; val 16 x 8 x 256\n",
                (long long)a.gpt_steps);
    for (const char* mode : {"static", "dynamic"}) {
      c::CompressOptions co;
      co.quantization.enabled = true, co.quantization.quant.mode = mode, co.quantization.calibration_batches = 8;
      co.evaluation.latency_repeats = 5;
      const auto r = c::compress_model(gpt, co, g);
      const auto& f = r.stats.front();
      const auto& q = r.stats.back();
      std::printf("int8 %-7s: perplexity %.4f -> %.4f (%+.2f%%), weights %.3f -> %.3f MB (%.3fx), latency %.1f -> %.1f ms (%.2fx)\n",
                  mode, std::exp(f.loss), std::exp(q.loss), 100 * (std::exp(q.loss - f.loss) - 1), f.bytes / 1e6,
                  q.bytes / 1e6, double(q.bytes) / f.bytes, f.latency_ms, q.latency_ms, f.latency_ms / q.latency_ms);
    }
  }
}

// One latency row: fp32 and int8 (static calibrated on `calib`, or dynamic) in xtrain, and ONNX Runtime's.
void latency_row(const Args& a, const char* what, const models::Model& m, const at::Tensor& x,
                 const std::function<at::Tensor(int64_t)>& calib, const c::TraceHints& hints, const std::string& mode) {
  at::NoGradGuard no_grad;
  m.module->eval();
  const double f = c::median_latency_ms([&] { m.forward(x); }, 10);
  c::QuantOptions qo;
  qo.mode = mode;
  auto q = c::wrap(m, qo, hints);
  if (mode != "dynamic") c::calibrate(q, calib, 4);
  c::convert(q);
  const double i8 = c::median_latency_ms([&] { q.model.forward(x); }, 10);
  double of = -1, oi = -1;
  if (a.ort) {
    of = ort_latency(*q.graph, nullptr, x, "fp32");
    oi = ort_latency(*q.graph, q.plan.get(), x, "int8");
  }
  std::printf("| %-30s | %8.2f ms | %8.2f ms | %12.2fx | %5.2f ms | %5.2f ms |\n", what, f, i8, f / i8, of, oi);
}

void latency_section(const Args& a, const Data& d, const models::Model& base) {
  // ---- latency only: ResNet-18 (images) and the default GPT (256 tokens)
  std::printf("\nLatency, untrained weights (accuracy not measured), %lld thread(s)\n", (long long)a.threads);
  std::printf("| %-30s | fp32 xtrain | int8 xtrain | int8 speed-up | fp32 ORT | int8 ORT |\n", "model / input");
  {
    models::ModelOptions o;
    o.type = "resnet18", o.num_classes = 10;
    auto m = models::build_model(o);
    const auto x = d.val_x.narrow(0, 0, 32);
    latency_row(a, "ResNet-18, batch 32", m, x, [&](int64_t i) { return d.val_x.narrow(0, 32 * i, 32); }, {{1, 28, 28}}, "static");
  }
  {
    models::ModelOptions o;  // the default GPT: 4 layers, C 256, 4 heads, T 256, bytes
    at::manual_seed(1);
    auto m = models::build_model(o);
    const auto x = at::randint(0, 256, {4, 256}, at::kLong);
    latency_row(a, "default GPT, 4 x 256 tokens", m, x, [&](int64_t) { return at::randint(0, 256, {4, 256}, at::kLong); }, {},
                "static");
    latency_row(a, "default GPT, dynamic int8", m, x, nullptr, {}, "dynamic");
  }
  {
    auto x = d.val_x.narrow(0, 0, 256);
    latency_row(a, "MLP (trained), batch 256", base, x, [&](int64_t i) { return d.val_x.narrow(0, 256 * i, 256); },
                {{1, 28, 28}}, "static");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // line by line into a log
  const Args a = parse_args(argc, argv);
  at::set_num_threads(static_cast<int>(a.threads));
  std::printf("int8 GEMM check against the exact integer reference: %s\n%s\n", check_gemm() ? "ok" : "FAILED",
              c::int8_path_reason().c_str());
  Data d = open_fashion_mnist();
  const auto h = hooks(d);
  const auto base = mlp_section(a, d, h);
  resnet_section(a, d);
  gpt_section(a);
  latency_section(a, d, base);
  return 0;
}
