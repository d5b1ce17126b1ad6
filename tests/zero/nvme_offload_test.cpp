// NVMe offload of the ZeRO optimizer state (zero/offload/): the io_uring file against the bytes
// written; NvmeOptimizerState against the in-memory optimizer over the same data (the file holds
// exactly what memory would have held, read back through the class and straight from the file);
// stages 1 and 2 with offload against the same stage without it over Gloo at 1 and 2 ranks; sharded
// checkpoints interchangeable with the in-memory strategy's; and the errors for a bad nvme_path.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "support/fixtures.h"
#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/optim/optimizer.h"
#include "xtrain/zero/offload/nvme_optimizer.h"
#include "xtrain/zero/offload/uring_file.h"
#include "xtrain/zero/shard_io.h"

namespace xtrain {
namespace {

at::Tensor random(int64_t n, uint64_t seed, at::ScalarType dtype = at::kFloat) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({n}, gen, at::TensorOptions().dtype(at::kFloat)).to(dtype);
}

// ---- UringFile ----

TEST(NvmeUringFile, RoundTripWithUnalignedTailsAndBuffers) {
  const auto dir = testing::temp_dir("nvme_uring");
  for (bool single_submit : {false, true}) {
    for (bool overlap : {true, false}) {
      zero::AioOptions aio;
      aio.block_size = 8192;  // several requests per operation
      aio.queue_depth = 3;
      aio.single_submit = single_submit;
      aio.overlap_events = overlap;
      const std::string path = c10::str(dir, "/f", single_submit, overlap);
      zero::UringFile f(path, aio);
      const std::vector<int64_t> sizes{1, 4095, 4096, 4097, 3 * 8192 + 17, 100000};
      std::vector<at::Tensor> data;
      std::vector<int64_t> offsets, tickets;
      int64_t offset = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {  // all queued before any is waited for
        auto bytes = (random(sizes[i], 100 + i).abs() * 50).to(at::kByte);
        // Aligned memory for even i; odd i from an at::empty buffer at a 1-byte offset.
        auto buf = i % 2 == 0 ? zero::aligned_float_buffer((sizes[i] + 3) / 4).view(at::kByte).narrow(0, 0, sizes[i])
                              : at::empty({sizes[i] + 1}, at::kByte).narrow(0, 1, sizes[i]);
        buf.copy_(bytes);
        data.push_back(buf);
        offsets.push_back(offset);
        tickets.push_back(f.submit_write(buf.data_ptr(), sizes[i], offset));
        offset += (sizes[i] + zero::kIoAlign - 1) / zero::kIoAlign * zero::kIoAlign;
      }
      for (auto it = tickets.rbegin(); it != tickets.rend(); ++it) f.wait(*it);
      EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(path)), offsets.back() + sizes.back())
          << "the file ends at the last byte written";
      for (size_t i = 0; i < sizes.size(); ++i) {
        auto back = zero::aligned_float_buffer((sizes[i] + 3) / 4 + 1).view(at::kByte).narrow(0, 0, sizes[i]);
        f.read(back.data_ptr(), sizes[i], offsets[i]);
        testing::expect_equal(back, data[i], c10::str("bytes ", sizes[i], " at ", offsets[i], " single_submit ",
                                                      single_submit, " overlap ", overlap));
      }
      // Independent of the class: the same bytes through a plain stream.
      std::ifstream in(path, std::ios::binary);
      std::vector<char> raw(sizes[4]);
      in.seekg(offsets[4]);
      in.read(raw.data(), sizes[4]);
      EXPECT_EQ(std::memcmp(raw.data(), data[4].data_ptr(), sizes[4]), 0);
      // Reading past the end is a short read, with the path and offset in the message.
      auto buf = zero::aligned_float_buffer(2048);
      try {
        f.read(buf.data_ptr(), 8192, offset + 4096 * 10);
        ADD_FAILURE() << "no error reading past the end of " << path;
      } catch (const c10::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << msg;
        EXPECT_NE(msg.find(std::to_string(offset + 4096 * 10)), std::string::npos) << msg;
      }
    }
  }
}

// ---- NvmeOptimizerState against the in-memory optimizer ----

constexpr int64_t kNumel = 10000;  // not a multiple of any chunk size below

// Two groups, a parameter across several chunks, gaps no segment covers (padding) and a tail gap.
const std::vector<optim::Segment> kSegments{
    {0, 1500, 0, 0}, {1500, 2600, 1, 1}, {4200, 800, 0, 2}, {5000, 4000, 1, 3}, {9200, 700, 0, 4}};

optim::OptimizerOptions optimizer_options(const std::string& kind) {
  optim::OptimizerOptions o;
  if (kind == "SGD") {
    o.type = "SGD";
    o.sgd.lr = 0.05;
    o.sgd.momentum = 0.9;
    o.sgd.dampening = 0.1;
    o.sgd.weight_decay = 0.01;
    return o;
  }
  o.type = kind == "Adam-L2" ? "Adam" : "AdamW";
  o.adam.adam_w_mode = kind != "Adam-L2";
  o.adam.lr = 0.01;
  o.adam.betas = {0.9, 0.99};
  o.adam.weight_decay = 0.05;
  return o;
}

optim::StepInputs step_inputs(const at::Tensor& grads, int64_t step) {
  optim::StepInputs in;
  in.grads = grads;
  in.grad_scale = 0.5 + 0.1 * static_cast<double>(step);
  in.segments = &kSegments;
  in.groups = {{0.01, 0.1}, {0.02, 0.0}};
  return in;
}

// The file's arrays as nvme_optimizer.h lays them out, read without the class: [1 + S] x [numel].
std::vector<at::Tensor> read_layout(const std::string& path, int64_t numel, int64_t chunk, int64_t arrays,
                                    int64_t expect_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> raw(expect_bytes / 4);
  in.read(reinterpret_cast<char*>(raw.data()), expect_bytes);
  EXPECT_EQ(in.gcount(), expect_bytes) << path;
  EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(path)), expect_bytes) << path;
  std::vector<at::Tensor> out;
  for (int64_t j = 0; j < arrays; ++j) {
    auto t = at::empty({numel}, at::kFloat);
    for (int64_t k = 0; k * chunk < numel; ++k) {
      const int64_t len = std::min(chunk, numel - k * chunk);
      const float* src = raw.data() + k * arrays * chunk + j * chunk;
      std::memcpy(t.data_ptr<float>() + k * chunk, src, len * 4);
      for (int64_t i = len; i < chunk; ++i) EXPECT_EQ(src[i], 0.f) << "padding of chunk " << k << " array " << j;
    }
    out.push_back(t);
  }
  return out;
}

struct StateCase {
  std::string optimizer;
  int64_t sub_group_size;
  at::ScalarType grad_dtype;
  bool overlap = true;
  bool single_submit = false;
};

void check_against_memory(const StateCase& k, const std::string& dir) {
  const std::string what = c10::str(k.optimizer, " sub_group_size ", k.sub_group_size, " grads ", k.grad_dtype,
                                    " overlap ", k.overlap, " single_submit ", k.single_submit);
  const auto options = optimizer_options(k.optimizer);
  zero::AioOptions aio;
  aio.block_size = 4096 * 3;
  aio.queue_depth = 4;
  aio.overlap_events = k.overlap;
  aio.single_submit = k.single_submit;
  zero::NvmeOptimizerState nvme(dir, 0, kNumel, options, zero::OffloadOptimizerOptions{}, aio, k.sub_group_size);
  auto ref = optim::make_optimizer(options);
  ref->init_state(kNumel);
  auto master = random(kNumel, 7);
  nvme.initialize(master);
  const auto out_dtype = k.grad_dtype == at::kFloat ? at::kFloat : at::kBFloat16;
  auto params_out = at::zeros({kNumel}, out_dtype);
  constexpr int64_t kSteps = 4;
  for (int64_t s = 0; s < kSteps; ++s) {
    const auto grads = random(kNumel, 1000 + s, k.grad_dtype);
    auto in = step_inputs(grads, s);
    nvme.step(in, params_out);
    in.params = master;
    ref->step(in);
    testing::expect_equal(params_out, master.to(out_dtype), c10::str("params_out after step ", s, ", ", what));
  }
  EXPECT_EQ(nvme.step_count(), kSteps);
  const auto stats = nvme.last_step_stats();
  EXPECT_EQ(stats.bytes_read, nvme.disk_bytes()) << what;
  EXPECT_EQ(stats.bytes_written, nvme.disk_bytes()) << what;

  testing::expect_equal(nvme.read("master"), master, "master, " + what);
  auto ref_state = ref->state();
  ASSERT_EQ(nvme.state_names().size(), ref_state.size());
  for (size_t j = 0; j < ref_state.size(); ++j) {
    EXPECT_EQ(nvme.state_names()[j], ref_state[j].first);
    testing::expect_equal(nvme.read(ref_state[j].first), ref_state[j].second, ref_state[j].first + ", " + what);
  }
  const int64_t arrays = 1 + static_cast<int64_t>(ref_state.size());
  const int64_t chunk = (std::min(k.sub_group_size, int64_t{1} << 20) + 1023) / 1024 * 1024;
  EXPECT_EQ(nvme.chunk_numel(), std::min(chunk, (kNumel + 1023) / 1024 * 1024)) << what;
  const auto raw = read_layout(nvme.file_path(), kNumel, nvme.chunk_numel(), arrays, nvme.disk_bytes());
  testing::expect_equal(raw[0], master, "master in the file, " + what);
  for (size_t j = 0; j < ref_state.size(); ++j) {
    testing::expect_equal(raw[j + 1], ref_state[j].second, ref_state[j].first + " in the file, " + what);
  }
}

TEST(NvmeOptimizerState, FilesHoldWhatTheInMemoryOptimizerHolds) {
  const auto dir = testing::temp_dir("nvme_state");
  for (const std::string opt : {"AdamW", "Adam-L2", "SGD"}) {
    // 1000 -> chunks of 1024 (10 chunks, the last 784); 3000 -> 3072; 4096; one chunk for the shard.
    for (int64_t sub_group : {1000, 3000, 4096, 1000000000}) {
      for (auto dtype : {at::kFloat, at::kBFloat16}) check_against_memory({opt, sub_group, dtype}, dir);
    }
  }
  check_against_memory({"AdamW", 3000, at::kFloat, /*overlap=*/false}, dir);
  check_against_memory({"AdamW", 1000, at::kBFloat16, true, /*single_submit=*/true}, dir);
}

TEST(NvmeOptimizerState, WriteThenReadAndFilesRemoved) {
  const auto dir = testing::temp_dir("nvme_rw");
  std::string path;
  {
    zero::NvmeOptimizerState nvme(dir, 3, kNumel, optimizer_options("AdamW"), {}, {}, 2000);
    path = nvme.file_path();
    EXPECT_EQ(path.rfind(c10::str(dir, "/xtrain_rank3_", ::getpid(), "/"), 0), 0u) << path;
    EXPECT_EQ(nvme.state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
    EXPECT_EQ(nvme.disk_bytes(), 5 * 3 * 2048 * 4);  // 5 chunks of 2048 elements, 3 arrays
    nvme.initialize(random(kNumel, 1));
    const auto t = random(kNumel, 2);
    nvme.write("exp_avg_sq", t);
    testing::expect_equal(nvme.read("exp_avg_sq"), t, "exp_avg_sq written then read");
    testing::expect_equal(nvme.read("master"), random(kNumel, 1), "master untouched by writing exp_avg_sq");
    testing::expect_equal(nvme.read("exp_avg"), at::zeros({kNumel}), "exp_avg starts at zero");
    EXPECT_THROW(nvme.read("momentum_buffer"), c10::Error);
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(path).parent_path())) << "the rank folder is removed";
}

// The UsageError's message, or "" when constructing succeeds.
std::string nvme_error(const std::string& nvme_path, int64_t numel = kNumel) {
  try {
    zero::NvmeOptimizerState nvme(nvme_path, 0, numel, optimizer_options("AdamW"), {}, {}, 4096);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(NvmeOptimizerState, BadPathOrTooLittleSpaceIsAUsageError) {
  const auto dir = testing::temp_dir("nvme_bad");
  EXPECT_NE(nvme_error("").find("needs offload_optimizer.nvme_path"), std::string::npos) << nvme_error("");
  {  // a missing folder is created, as DeepSpeed creates it (with a warning)
    const auto missing = dir + "/not_there/yet";
    EXPECT_EQ(nvme_error(missing), "");
    EXPECT_TRUE(std::filesystem::is_directory(missing));
  }
  {
    std::ofstream(dir + "/a_file") << "x";  // a folder cannot be made under a file, even as root
    const auto msg = nvme_error(dir + "/a_file/sub");
    EXPECT_NE(msg.find(dir + "/a_file/sub\" does not exist and cannot be created"), std::string::npos) << msg;
    EXPECT_NE(msg.find("zero_optimization.offload_optimizer.nvme_path"), std::string::npos) << msg;
    const auto file = nvme_error(dir + "/a_file");
    EXPECT_NE(file.find(dir + "/a_file\" is not a folder"), std::string::npos) << file;
  }
  ::setenv(zero::kNvmeFakeFreeBytesEnv, "1000000", 1);
  const auto msg = nvme_error(dir, 1 << 20);  // 12 MiB of Adam state + 64 MiB margin > 1 MB
  ::unsetenv(zero::kNvmeFakeFreeBytesEnv);
  EXPECT_NE(msg.find("not enough free space"), std::string::npos) << msg;
  EXPECT_NE(msg.find("available 1000000"), std::string::npos) << msg;
  EXPECT_NE(msg.find(c10::str("need ", 12 * (1 << 20) + (64 << 20))), std::string::npos) << msg;
  EXPECT_NE(msg.find("zero_optimization.offload_optimizer.nvme_path"), std::string::npos) << msg;
  EXPECT_EQ(nvme_error(dir), "") << "enough space without the fake value";
}

// ---- Stages 1 and 2 with NVMe offload against the same stage in memory ----

constexpr int64_t kIn = 32, kHidden = 96, kOut = 5, kSteps = 8;

struct Mlp {
  zero::NamedParams params;
  at::Tensor loss(const data::Batch& b) const {
    auto h = at::tanh(at::linear(b.input, params[0].second, params[1].second));
    auto out = at::linear(h, params[2].second, params[3].second);
    return (out.to(at::kFloat) - b.target).pow(2).mean();
  }
};

// 3653 elements: 4 chunks of 1024 at one rank, 2 per rank at two (sub_group_size 1000).
Mlp make_mlp() {
  Mlp m;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes{
      {"fc1.weight", {kHidden, kIn}}, {"fc1.bias", {kHidden}}, {"fc2.weight", {kOut, kHidden}}, {"fc2.bias", {kOut}}};
  double seed = 0.3;
  for (const auto& [name, shape] : shapes) {
    const int64_t n = c10::multiply_integers(shape);
    auto t = (at::arange(n, at::kDouble) * 0.71 + seed).sin().mul(0.3).to(at::kFloat).view(shape);
    m.params.emplace_back(name, t.requires_grad_(true));
    seed += 1.1;
  }
  return m;
}

data::Batch batch(int64_t first, int64_t count) {
  auto i = at::arange(first, first + count, at::kDouble).unsqueeze(1);
  auto x = (i * at::arange(1, kIn + 1, at::kDouble) * 0.13).cos();
  auto y = (i * at::arange(1, kOut + 1, at::kDouble) * 0.05).sin();
  return {x.to(at::kFloat), y.to(at::kFloat)};
}

struct Case {
  int stage;
  bool bf16;
  int64_t gas = 2;
  double clip = 0.05;  // binds: gradient norms are ~0.1-1
};

// `nvme_path` empty: in memory; else offloaded there in chunks of 1024 elements.
config::Config make_config(const Case& k, int64_t world, int64_t micro, const std::string& nvme_path) {
  const std::string text = c10::str(
      R"({"train_micro_batch_size_per_gpu": )", micro, R"(, "gradient_accumulation_steps": )", k.gas,
      R"(, "gradient_clipping": )", k.clip,
      R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.9, 0.99], "weight_decay": 0.1}})",
      R"(, "bf16": {"enabled": )", k.bf16 ? "true" : "false", R"(}})");
  config::LoadOptions lo;
  lo.world_size = world;
  lo.quiet = true;
  auto cfg = config::load_text(text, lo).config;
  cfg.zero_optimization.stage = k.stage;
  cfg.zero_optimization.reduce_bucket_size = 1000;  // stage 2: several units
  cfg.zero_optimization.sub_group_size = 1000;
  cfg.aio.block_size = 8192;
  if (!nvme_path.empty()) {
    cfg.zero_optimization.offload_optimizer.device = "nvme";
    cfg.zero_optimization.offload_optimizer.nvme_path = nvme_path;
  }
  return cfg;
}

at::Tensor flat_params(const Mlp& m) {
  std::vector<at::Tensor> v;
  for (const auto& [n, p] : m.params) v.push_back(p.detach().to(at::kFloat).reshape({-1}));
  return at::cat(v);
}

// Steps [from, to): global micro-batch g is samples [g·W·micro, (g+1)·W·micro), rank r's the r-th micro.
void train(Engine& e, const Case& k, int64_t world, int64_t rank, int64_t from, int64_t to, int64_t micro) {
  for (int64_t s = from; s < to; ++s) {
    for (int64_t m = 0; m < k.gas; ++m) {
      const int64_t g = s * k.gas + m;
      e.backward(e.forward(batch((g * world + rank) * micro, micro)));
      e.step();
    }
  }
}

std::shared_ptr<comm::Communicator> connect() {
  comm::CommOptions o;
  o.timeout_seconds = 60;
  return comm::Communicator::create(comm::rank_info_from_env(), o);
}

std::string rank_folder(const std::string& nvme_path, int64_t rank) {
  return c10::str(nvme_path, "/xtrain_rank", rank, "_", ::getpid());
}

TEST(NvmeWorker, MatchesInMemoryStrategy) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const std::string dir = testing::worker_env("XTRAIN_NVME_DIR");
  const int64_t W = c->size(), micro = 3;
  for (int stage : {1, 2}) {
    for (bool bf16 : {false, true}) {
      const Case k{stage, bf16};
      const std::string what = c10::str("stage ", stage, bf16 ? " bf16" : " fp32", " W ", W);
      Mlp mem = make_mlp(), off = make_mlp();
      Engine em(mem.params, [&mem](const data::Batch& b) { return mem.loss(b); }, make_config(k, W, micro, ""), c);
      {
        Engine eo(off.params, [&off](const data::Batch& b) { return off.loss(b); }, make_config(k, W, micro, dir), c);
        EXPECT_NE(eo.strategy().describe().find("on NVMe in " + rank_folder(dir, c->rank())), std::string::npos)
            << eo.strategy().describe();
        const auto mo = eo.memory(), mm = em.memory();
        const int64_t shard = em.layout().numel / W, chunks = (shard + 1023) / 1024;
        EXPECT_EQ(mo.disk_bytes, chunks * 3 * 1024 * 4) << what;  // master, exp_avg, exp_avg_sq per chunk
        EXPECT_EQ(mo.master_bytes, std::min<int64_t>(chunks, 3) * 1024 * 4) << what;  // the chunk buffers only
        EXPECT_EQ(mo.optimizer_bytes, 2 * mo.master_bytes) << what;
        EXPECT_EQ(mm.disk_bytes, 0);
        EXPECT_EQ(mo.param_bytes, mm.param_bytes);
        train(em, k, W, c->rank(), 0, kSteps, micro);
        train(eo, k, W, c->rank(), 0, kSteps, micro);
        EXPECT_EQ(eo.strategy().optimizer_step_count(), em.strategy().optimizer_step_count()) << what;
        // The same arithmetic on every element, only chunked: bit-identical in fp32 and bf16.
        testing::expect_equal(flat_params(off), flat_params(mem), "parameters with NVMe offload, " + what);
      }
      EXPECT_FALSE(std::filesystem::exists(rank_folder(dir, c->rank()))) << "files removed with the engine";
    }
  }
  c->barrier();
}

void run_nvme_workers(const std::string& test, int world, testing::Env env) {
  testing::WorkerOptions o;
  o.world_size = world;
  o.timeout_s = 120;
  o.env = std::move(env);
  testing::expect_workers_ok(testing::run_workers(test, o));
}

TEST(NvmeOffload, StagesOneAndTwoMatchInMemoryAtOneAndTwoRanks) {
  for (int world : {1, 2}) {
    run_nvme_workers("NvmeWorker.MatchesInMemoryStrategy", world, {{"XTRAIN_NVME_DIR", testing::temp_dir("nvme_e")}});
  }
}

// Phase "save": kSteps/2 steps in memory and with NVMe offload at this world size, a checkpoint of
// each; the two consolidate to the same tensors. Phase "resume" (at another world size): each
// checkpoint loaded with and without offload, kSteps/2 more steps: all bit-identical.
TEST(NvmeWorker, CheckpointInterchange) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const std::string root = testing::worker_env("XTRAIN_NVME_CKPT"), dir = testing::worker_env("XTRAIN_NVME_DIR");
  const int64_t W = c->size(), micro = 12 / W;  // the global batch stays 12 samples
  const Case k{std::stoi(testing::worker_env("XTRAIN_ZERO_STAGE")), false};
  auto engine = [&](Mlp& m, bool offload) {
    return std::make_unique<Engine>(m.params, [&m](const data::Batch& b) { return m.loss(b); },
                                    make_config(k, W, micro, offload ? dir : ""), c);
  };
  if (testing::worker_env("XTRAIN_NVME_PHASE") == "save") {
    for (bool offload : {false, true}) {
      Mlp m = make_mlp();
      auto e = engine(m, offload);
      train(*e, k, W, c->rank(), 0, kSteps / 2, micro);
      checkpoint::CheckpointWriter w(root + (offload ? "/nvme" : "/mem"), "half", c->rank());
      e->save_checkpoint(w);
      w.finish_rank();
      c->barrier();
      if (c->rank() == 0) w.commit("{}", W);
      c->barrier();
    }
    if (c->rank() == 0) {
      const auto a = zero::consolidate(checkpoint::CheckpointReader(root + "/nvme"), true);
      const auto b = zero::consolidate(checkpoint::CheckpointReader(root + "/mem"), true);
      ASSERT_EQ(a.model.size(), b.model.size());
      ASSERT_EQ(a.optimizer.size(), b.optimizer.size());
      EXPECT_EQ(a.optimizer.size(), 2 * b.model.size());
      for (size_t i = 0; i < a.model.size(); ++i) {
        EXPECT_EQ(a.model[i].first, b.model[i].first);
        testing::expect_equal(a.model[i].second, b.model[i].second, "checkpoint model " + a.model[i].first);
      }
      for (size_t i = 0; i < a.optimizer.size(); ++i) {
        EXPECT_EQ(a.optimizer[i].first, b.optimizer[i].first);
        testing::expect_equal(a.optimizer[i].second, b.optimizer[i].second, "checkpoint " + a.optimizer[i].first);
      }
    }
    c->barrier();
    return;
  }
  auto resume = [&](const std::string& which, bool offload) {
    Mlp m = make_mlp();
    auto e = engine(m, offload);
    e->load_checkpoint(checkpoint::CheckpointReader(root + "/" + which));
    EXPECT_EQ(e->global_steps(), kSteps / 2);
    EXPECT_EQ(e->strategy().optimizer_step_count(), kSteps / 2);
    train(*e, k, W, c->rank(), kSteps / 2, kSteps, micro);
    return flat_params(m);
  };
  const auto ref = resume("mem", false);
  testing::expect_equal(resume("nvme", false), ref, c10::str("NVMe checkpoint resumed in memory at W ", W));
  testing::expect_equal(resume("mem", true), ref, c10::str("in-memory checkpoint resumed with NVMe at W ", W));
  testing::expect_equal(resume("nvme", true), ref, c10::str("NVMe checkpoint resumed with NVMe at W ", W));
  c->barrier();
}

void interchange(int save_world, int resume_world, int stage) {
  testing::Env env{{"XTRAIN_NVME_CKPT", testing::temp_dir("nvme_ckpt")},
                   {"XTRAIN_NVME_DIR", testing::temp_dir("nvme_ckpt_state")},
                   {"XTRAIN_ZERO_STAGE", std::to_string(stage)},
                   {"XTRAIN_NVME_PHASE", "save"}};
  run_nvme_workers("NvmeWorker.CheckpointInterchange", save_world, env);
  env["XTRAIN_NVME_PHASE"] = "resume";
  run_nvme_workers("NvmeWorker.CheckpointInterchange", resume_world, env);
}

TEST(NvmeOffload, Stage2CheckpointFromTwoRanksLoadsAtOneWithAndWithoutOffload) { interchange(2, 1, 2); }
TEST(NvmeOffload, Stage1CheckpointFromOneRankLoadsAtTwoWithAndWithoutOffload) { interchange(1, 2, 1); }

// Through the engine: each bad setting names its key.
std::string engine_error(const config::Config& cfg) {
  Mlp m = make_mlp();
  try {
    Engine e(m.params, [&m](const data::Batch& b) { return m.loss(b); }, cfg);
  } catch (const UsageError& err) {
    return err.what();
  }
  return "";
}

TEST(NvmeOffload, BadSettingsFailAtStartNamingTheKey) {
  const auto dir = testing::temp_dir("nvme_engine_bad");
  auto cfg = make_config({1, false}, 1, 3, dir);
  EXPECT_EQ(engine_error(cfg), "");
  cfg.zero_optimization.offload_optimizer.nvme_path = "";
  EXPECT_NE(engine_error(cfg).find("offload_optimizer.nvme_path"), std::string::npos) << engine_error(cfg);
  std::ofstream(dir + "/a_file") << "x";
  cfg.zero_optimization.offload_optimizer.nvme_path = dir + "/a_file";
  auto msg = engine_error(cfg);
  EXPECT_NE(msg.find(dir + "/a_file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("zero_optimization.offload_optimizer.nvme_path"), std::string::npos) << msg;
  cfg.zero_optimization.offload_optimizer.nvme_path = dir;
  cfg.zero_optimization.stage = 0;
  msg = engine_error(cfg);
  EXPECT_NE(msg.find("offload_optimizer.device nvme needs zero_optimization.stage"), std::string::npos) << msg;
  cfg.zero_optimization.stage = 2;
  cfg.aio.block_size = 1000;
  msg = engine_error(cfg);
  EXPECT_NE(msg.find("(aio.block_size)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace xtrain
