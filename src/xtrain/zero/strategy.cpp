// make_strategy: the stage picks the Strategy; combinations ZeRO does not support fail here, at start.
#include "xtrain/zero/strategy.h"

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/optim/registry.h"
#include "xtrain/zero/partitioned.h"
#include "xtrain/zero/replicated.h"
#include "xtrain/zero/stage3.h"

namespace xtrain::zero {

void check_supported(const StrategyOptions& o) {
  const auto& z = o.zero;
  XTRAIN_USAGE_CHECK(z.stage >= 0 && z.stage <= 3, "zero: zero_optimization.stage must be 0, 1, 2 or 3, got ", z.stage);
  XTRAIN_USAGE_CHECK(z.offload_optimizer.device != "nvme" || z.stage >= 1,
                     "zero: offload_optimizer.device nvme needs zero_optimization.stage 1, 2 or 3, got stage ", z.stage,
                     " (zero_optimization.offload_optimizer.device)");
  // DeepSpeed runs part of the step on the accelerator with ratio < 1 (ZeRO-Offload++, stage 3);
  // on this build every optimizer step already runs on the CPU.
  XTRAIN_USAGE_CHECK(z.offload_optimizer.ratio == 1.0, "zero: not supported yet: zero_optimization.offload_optimizer.ratio ",
                     z.offload_optimizer.ratio, " (only 1.0: the whole optimizer step on the CPU)");
  XTRAIN_USAGE_CHECK(!o.aio.use_gds, "zero: not supported yet: aio.use_gds (GPUDirect Storage needs CUDA and cuFile; ",
                     "xtrain reads and writes NVMe through io_uring)");
  if (z.stage == 0) return;
  // DeepSpeed's stage 1/2 optimizer asserts this (NCCL's 4-byte start alignment of 16-bit values).
  XTRAIN_USAGE_CHECK(z.stage == 3 || (z.allgather_bucket_size > 0 && z.allgather_bucket_size % 2 == 0),
                     "zero: allgather_bucket_size must be a positive multiple of 2, got ", z.allgather_bucket_size,
                     " (zero_optimization.allgather_bucket_size)");
  const auto& type = o.optimizer.type;
  const optim::OptimizerEntry& optimizer = optim::find_optimizer(type);  // its ZeRO support is its entry's
  XTRAIN_USAGE_CHECK(optimizer.zero != optim::ZeroSupport::unsupported, "zero: optimizer ", type,
                     " is not supported with zero_optimization.stage ", z.stage, " (ZeRO supports ",
                     optim::zero_support_summary(), ")");
  XTRAIN_USAGE_CHECK(optimizer.zero == optim::ZeroSupport::tested || o.allow_untested_optimizer, "zero: optimizer ",
                     type, " is not tested with ZeRO (stage ", z.stage, "); set \"zero_allow_untested_optimizer\": true");
  XTRAIN_USAGE_CHECK(z.offload_param.device == "none" || z.stage == 3, "zero: offload_param needs stage 3, got stage ",
                     z.stage, " (zero_optimization.offload_param.device)");
  XTRAIN_USAGE_CHECK(z.offload_optimizer.device == "none" || z.offload_optimizer.device == "cpu" ||
                         z.offload_optimizer.device == "nvme",
                     "zero: offload_optimizer.device must be none, cpu or nvme, got \"", z.offload_optimizer.device,
                     "\" (zero_optimization.offload_optimizer.device)");
  XTRAIN_USAGE_CHECK(o.alignment > 0, "zero: alignment must be > 0, got ", o.alignment);
}

// CPU offload of the optimizer: on a CPU build the master shard, the moments and the step already
// live in host memory, so `offload_optimizer.device: cpu` selects the same strategy.
std::vector<at::Tensor> Strategy::unreduced_gradient(const std::string& name) {
  XTRAIN_USAGE_ERROR("zero: ", describe(), " reduces gradients during backward; the gradient of ", name,
                     " cannot be combined across pipeline stages (use ZeRO stage 0 or 1 with pipeline.stages > 1)");
}

std::unique_ptr<Strategy> make_strategy(NamedParams params, std::shared_ptr<torch::nn::Module> module,
                                        StrategyOptions options, std::shared_ptr<comm::Communicator> dp) {
  check_supported(options);
  if (options.param_group.empty()) options.param_group = optim::assign_param_groups(params, options.optimizer);
  if (options.zero.stage == 0) return std::make_unique<ReplicatedStrategy>(std::move(params), options, std::move(dp));
  if (options.zero.stage == 3) {
    return std::make_unique<Stage3Strategy>(std::move(params), std::move(module), options, std::move(dp));
  }
  return std::make_unique<PartitionedStrategy>(std::move(params), options, std::move(dp));
}

}  // namespace xtrain::zero
