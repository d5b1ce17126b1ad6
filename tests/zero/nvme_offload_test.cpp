// NVMe offload of the ZeRO optimizer state (zero/offload/): the io_uring file against the bytes
// written; NvmeOptimizerState against the in-memory optimizer over the same data (the file holds
// exactly what memory would have held, read back through the class and straight from the file);
// and the errors for a bad nvme_path. Through the engine: nvme_offload_engine_test.cpp.
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

namespace xtrain::nvme_offload_test {
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

}  // namespace
}  // namespace xtrain::nvme_offload_test
