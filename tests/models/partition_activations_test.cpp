// activation_checkpointing.partition_activations (DeepSpeed's): under tensor parallelism each rank
// keeps only its 1/tp slice of a checkpointed block's input and all-gathers it before the
// recompute. Two tensor-parallel ranks, a checkpointed GPT with and without the key (config file
// text): the same loss and gradients bit for bit (the gather rebuilds the exact input), and exactly
// one extra collective per checkpointed block in backward, moving half a block input — none if the
// key were dropped.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "support/multiprocess.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/models/gpt_checkpointing.h"
#include "xtrain/models/gpt_tensor_parallel.h"

namespace xtrain::models::partition_activations_test {
namespace {

constexpr int64_t kLayers = 3, kVocab = 64, kSeq = 16;

struct Result {
  std::vector<at::Tensor> values;  // loss, then every gradient
  int64_t backward_collectives = 0;
  int64_t backward_bytes = 0;  // payload handed to collectives in backward
};

Result run(bool partition, const std::shared_ptr<comm::Communicator>& tp) {
  config::LoadOptions lo;
  lo.quiet = true;
  lo.world_size = tp->size();
  const auto cfg = config::load_text(c10::str(R"({"train_micro_batch_size_per_gpu": 1, "tensor_parallel": {"size": )",
                                              tp->size(), R"(}, "activation_checkpointing": {"enabled": true,
                                              "partition_activations": )", partition ? "true" : "false", "}}"),
                                     lo)
                        .config;
  ModelOptions o;
  o.layers = kLayers;
  o.d_model = 32;
  o.heads = 4;
  o.seq_len = kSeq;
  o.vocab = kVocab;
  torch::manual_seed(1);  // the same weights and data on both ranks
  auto gpt = TensorParallelGPT(o, tp);
  apply_activation_checkpointing(*gpt, cfg.activation_checkpointing);
  const auto data = at::randint(0, kVocab, {3, kSeq + 1});
  const at::Tensor loss = gpt->loss(gpt->forward(data.narrow(1, 0, kSeq)), data.narrow(1, 1, kSeq));
  Result r;
  const comm::CommStats before = tp->stats();
  loss.backward();
  r.backward_collectives = tp->stats().collectives - before.collectives;
  r.backward_bytes = tp->stats().bytes - before.bytes;
  r.values.push_back(loss.detach());
  for (const auto& p : gpt->parameters()) r.values.push_back(p.grad().clone());
  return r;
}

TEST(PartitionActivationsWorker, SameGradientsOneGatherPerBlock) {
  XTRAIN_WORKER_ONLY();
  const auto info = comm::rank_info_from_env();
  comm::CommOptions co;
  co.timeout_seconds = 60;
  auto tp = comm::Communicator::create(info, co);
  const Result whole = run(false, tp), parted = run(true, tp);
  EXPECT_EQ(parted.backward_collectives - whole.backward_collectives, kLayers);
  // Each gather sends this rank's half of a block input [3, kSeq, 32] fp32: the rank kept half.
  EXPECT_EQ(parted.backward_bytes - whole.backward_bytes, kLayers * (3 * kSeq * 32 / 2) * 4);
  ASSERT_EQ(parted.values.size(), whole.values.size());
  for (size_t i = 0; i < whole.values.size(); ++i) {
    EXPECT_TRUE(at::equal(parted.values[i], whole.values[i]))
        << "value " << i << " (0: loss), largest difference "
        << (parted.values[i] - whole.values[i]).abs().max().item<double>();
  }
}

TEST(PartitionActivations, TwoTensorParallelRanksKeepHalfAndGatherInBackward) {
  testing::WorkerOptions o;
  o.world_size = 2;
  o.timeout_s = 120;
  testing::expect_workers_ok(testing::run_workers("PartitionActivationsWorker.SameGradientsOneGatherPerBlock", o));
}

}  // namespace
}  // namespace xtrain::models::partition_activations_test
