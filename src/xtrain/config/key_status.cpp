#include "xtrain/config/key_status.h"

#include <unordered_map>

namespace xtrain::config {
namespace {

constexpr KeyState H = KeyState::honoured;
constexpr KeyState R = KeyState::refused;
constexpr KeyState N = KeyState::no_effect;

const char* const kFusedAdam = "xtrain always runs its fused Adam, whose results match torch.optim.Adam(W)";
const char* const kNoWandb = "Weights & Biases is not supported (no network); wandb.enabled is refused";
const char* const kNoComet = "Comet is not supported (no network); comet.enabled is refused";
const char* const kNoCommsLog = "the comms logger is not supported; comms_logger.enabled is refused";
const char* const kNoPin = "xtrain does not page-lock offload staging buffers; they only speed up host-device copies";
const char* const kNvmeBuffers = "xtrain's NVMe offload uses three chunk buffers (read, step, write)";
const char* const kParamBuffers = "a unit's parameter shard is read from NVMe when it is gathered, not cached";
const char* const kStage3Release = "xtrain releases a gathered unit after every use";

// Keys others are implementing are `refused` until they land (issue 21): see the brief's list.
const std::vector<KeyStatus> kTable = {
    // top level
    {"train_batch_size", H, "Batch.DeepSpeedCases"},
    {"train_micro_batch_size_per_gpu", H, "Batch.DeepSpeedCases"},
    {"gradient_accumulation_steps", H, "DataParallel.TwoRanksOverlappedWithAccumulation"},
    {"gradient_clipping", H, "Engine.MatchesPyTorchStepSemantics"},
    {"steps_per_print", H, "RunKeys.TrainingLoopKeysShapeTheRun"},
    {"wall_clock_breakdown", H, "RunMonitor.StepMetricsEverywhere"},
    {"memory_breakdown", H, "EngineKeys.MemoryBreakdownPrintsEachStageOfTheStep"},
    {"dump_state", N, "DeepSpeed prints its engine state at start; `xtrain config` prints the resolved config"},
    {"prescale_gradients", H, "GradScaling.DeepSpeedSemanticsAlwaysGiveTheMean"},
    {"gradient_predivide_factor", H, "GradScaling.DeepSpeedSemanticsAlwaysGiveTheMean"},
    {"communication_data_type", H, "ZeroComm.CommunicationDataTypeRoundsTheSumTwoRanks"},
    {"sparse_gradients", R, ""},
    {"dataloader_drop_last", N, "xtrain's loaders always drop the last partial batch (every step sees train_batch_size samples)"},
    {"zero_allow_untested_optimizer", H, "RunKeys.ZeroChecksFollowStageAndUntestedOptimizer"},
    {"zero_force_ds_cpu_optimizer", N, "xtrain always steps offloaded state with its own fused CPU optimizer"},
    {"data_types.grad_accum_dtype", H, "Zero.TwoRanksStage2MatchesStageZero"},
    {"bfloat16", H, "Config.DeprecatedAliases"},
    // optimizer
    {"optimizer.type", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/adamw"},
    {"optimizer.params (Adam, AdamW).lr", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/adamw"},
    {"optimizer.params (Adam, AdamW).betas", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/adamw_betas"},
    {"optimizer.params (Adam, AdamW).eps", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/adamw"},
    {"optimizer.params (Adam, AdamW).weight_decay", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/adamw"},
    {"optimizer.params (Adam, AdamW).bias_correction", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/adamw_nobc"},
    {"optimizer.params (Adam, AdamW).adam_w_mode", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/adam_l2"},
    {"optimizer.params (Adam, AdamW).torch_adam", N, kFusedAdam},
    {"optimizer.params (Adam, AdamW).amsgrad", R, "DeepSpeed's fused Adam has no amsgrad either"},
    {"optimizer.params (Adam, AdamW).state_dtype", H, "Adam8bit.TinyGptLossCurveFollowsFp32AdamW"},
    {"optimizer.params (Lamb).lr", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/lamb"},
    {"optimizer.params (Lamb).bias_correction", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/lamb"},
    {"optimizer.params (Lamb).betas", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/lamb"},
    {"optimizer.params (Lamb).eps", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/lamb"},
    {"optimizer.params (Lamb).eps_inside_sqrt", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/lamb"},
    {"optimizer.params (Lamb).weight_decay", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/lamb"},
    {"optimizer.params (Lamb).max_coeff", H, "Optim.LambTrustRatiosHitTheClampsAndAreOneForAZeroParameter"},
    {"optimizer.params (Lamb).min_coeff", H, "Optim.LambTrustRatiosHitTheClampsAndAreOneForAZeroParameter"},
    // L-BFGS: trajectories equal torch.optim.LBFGS (max_eval and the tolerances at torch's defaults,
    // which end the inner loops in the fixtures as they end torch's).
    {"optimizer.params (LBFGS).lr", H, "Runs/LbfgsTrajectory.MatchesTorch/2"},
    {"optimizer.params (LBFGS).max_iter", H, "Runs/LbfgsTrajectory.MatchesTorch/0"},
    {"optimizer.params (LBFGS).max_eval", H, "Runs/LbfgsTrajectory.MatchesTorch/3"},
    {"optimizer.params (LBFGS).tolerance_grad", H, "Runs/LbfgsTrajectory.MatchesTorch/0"},
    {"optimizer.params (LBFGS).tolerance_change", H, "Runs/LbfgsTrajectory.MatchesTorch/3"},
    {"optimizer.params (LBFGS).history_size", H, "Runs/LbfgsTrajectory.MatchesTorch/0"},
    {"optimizer.params (LBFGS).line_search_fn", H, "Runs/LbfgsTrajectory.MatchesTorch/1"},
    {"optimizer.params (SGD).lr", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/sgd"},
    {"optimizer.params (SGD).momentum", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/sgd_momentum"},
    {"optimizer.params (SGD).dampening", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/sgd_momentum"},
    {"optimizer.params (SGD).weight_decay", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/sgd"},
    {"optimizer.params (SGD).nesterov", H, "Optim/TorchParity.TrajectoryAndStateMatchReference/sgd_nesterov"},
    // scheduler
    {"scheduler.type", H, "Schedule.EveryStepMatchesTheReferenceFormulas"},
    {"scheduler.params (WarmupLR, WarmupDecayLR).warmup_min_lr", H, "Schedule.DeepSpeedWarmupAssertions"},
    {"scheduler.params (WarmupLR, WarmupDecayLR).warmup_max_lr", H, "Schedule.DeepSpeedWarmupAssertions"},
    {"scheduler.params (WarmupLR, WarmupDecayLR).warmup_num_steps", H, "Schedule.DeepSpeedWarmupAssertions"},
    {"scheduler.params (WarmupLR, WarmupDecayLR).warmup_type", H, "Schedule.EveryStepMatchesTheReferenceFormulas"},
    {"scheduler.params (WarmupLR, WarmupDecayLR).total_num_steps", H, "Schedule.DeepSpeedWarmupAssertions"},
    {"scheduler.params (WarmupLR, WarmupDecayLR).last_batch_iteration", H, "Schedule.EveryStepMatchesTheReferenceFormulas"},
    {"scheduler.params (WarmupCosineLR).total_num_steps", H, "Schedule.DeepSpeedWarmupCosineAssertions"},
    {"scheduler.params (WarmupCosineLR).warmup_min_ratio", H, "Schedule.DeepSpeedWarmupCosineAssertions"},
    {"scheduler.params (WarmupCosineLR).warmup_num_steps", H, "Schedule.DeepSpeedWarmupCosineAssertions"},
    {"scheduler.params (WarmupCosineLR).cos_min_ratio", H, "Schedule.DeepSpeedWarmupCosineAssertions"},
    {"scheduler.params (WarmupCosineLR).warmup_type", H, "Schedule.EveryStepMatchesTheReferenceFormulas"},
    {"scheduler.params (WarmupCosineLR).last_batch_iteration", H, "Schedule.EveryStepMatchesTheReferenceFormulas"},
    {"scheduler.params (OneCycle).cycle_min_lr", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).cycle_max_lr", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).decay_lr_rate", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).cycle_first_step_size", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).cycle_second_step_size", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).cycle_first_stair_count", N, "DeepSpeed's OneCycle reads it and never uses it"},
    {"scheduler.params (OneCycle).cycle_second_stair_count", N, "DeepSpeed's OneCycle reads it and never uses it"},
    {"scheduler.params (OneCycle).decay_step_size", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).cycle_momentum", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).cycle_min_mom", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).cycle_max_mom", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).decay_mom_rate", H, "Schedule.DeepSpeedOneCycleAssertions"},
    {"scheduler.params (OneCycle).last_batch_iteration", H, "Schedule.EveryStepMatchesTheReferenceFormulas"},
    {"scheduler.params (LRRangeTest).lr_range_test_min_lr", H, "Schedule.DeepSpeedRangeTestAssertions"},
    {"scheduler.params (LRRangeTest).lr_range_test_step_size", H, "Schedule.DeepSpeedRangeTestAssertions"},
    {"scheduler.params (LRRangeTest).lr_range_test_step_rate", H, "Schedule.DeepSpeedRangeTestAssertions"},
    {"scheduler.params (LRRangeTest).lr_range_test_staircase", H, "Schedule.DeepSpeedRangeTestAssertions"},
    {"scheduler.params (LRRangeTest).last_batch_iteration", H, "Schedule.EveryStepMatchesTheReferenceFormulas"},
    {"scheduler.params (Adaptive).lr", H, "Adaptive.LinearWarmupNeverUsesZero"},
    {"scheduler.params (Adaptive).warmup_num_steps", H, "Adaptive.LinearWarmupNeverUsesZero"},
    {"scheduler.params (Adaptive).smoothing", H, "Adaptive.CutStepsMatchTheSimulation"},
    {"scheduler.params (Adaptive).patience", H, "Adaptive.FlatLossClosedForm"},
    {"scheduler.params (Adaptive).patience_growth", H, "Adaptive.CutStepsMatchTheSimulation"},
    {"scheduler.params (Adaptive).factor", H, "Adaptive.FlatLossClosedForm"},
    {"scheduler.params (Adaptive).threshold", H, "Adaptive.CutStepsMatchTheSimulation"},
    {"scheduler.params (Adaptive).cooldown", H, "Adaptive.FlatLossClosedForm"},
    {"scheduler.params (Adaptive).min_lr", H, "Adaptive.FlatLossClosedForm"},
    // precision
    {"fp16.enabled", H, "MixedPrecision.Fp16OverflowSkipsTheStepAndChangesNothing"},
    {"fp16.auto_cast", H, "MixedPrecision.Fp16OnCpuIsRefusedWithAHint"},
    {"fp16.loss_scale", H, "LossScaler.StaticScaleSkipsButNeverChanges"},
    {"fp16.initial_scale_power", H, "DeepSpeedRules.Fp16ScalerDefaultsFollowWhetherTheBlockNamesScalerKeys"},
    {"fp16.loss_scale_window", H, "LossScaler.WindowDoublingWithoutOverflow"},
    {"fp16.hysteresis", H, "DeepSpeedRules.Fp16ScalerDefaultsFollowWhetherTheBlockNamesScalerKeys"},
    {"fp16.consecutive_hysteresis", H, "LossScaler.ConsecutiveHysteresisRefillsOnEveryCleanStep"},
    {"fp16.min_loss_scale", H, "LossScaler.StopsAtMinimumWithAdvice"},
    {"fp16.fp16_master_weights_and_grads", R, ""},
    {"bf16.enabled", H, "MixedPrecision.Bf16TracksFp32"},
    {"bf16.immediate_grad_update", N, "xtrain accumulates gradients in data_types.grad_accum_dtype and applies them at the step; there is no separate bf16 optimizer to update early"},
    {"amp.enabled", H, "MixedPrecision.AmpMatchesPyTorchCpuAutocast"},
    {"amp.dtype", H, "MixedPrecision.AmpMatchesPyTorchCpuAutocast"},
#ifdef XTRAIN_WITH_CUDA
    {"tf32.enabled", H, "EngineKeys.Tf32SetsTheCudaMatmulMode"},
#else
    {"tf32.enabled", N, "this build has no CUDA; TF32 is a CUDA matmul mode (Ampere and later), CPU matmuls are full fp32"},
#endif
    // zero_optimization
    {"zero_optimization.cpu_offload", H, "Config.DeprecatedAliases"},
    {"zero_optimization.cpu_offload_param", H, "Config.DeprecatedAliases"},
    {"zero_optimization.cpu_offload_use_pin_memory", H, "Config.DeprecatedAliases"},
    {"zero_optimization.prefetch_bucket_size", H, "Config.DeprecatedAliases"},
    {"zero_optimization.param_persistence_threshold", H, "Config.DeprecatedAliases"},
    {"zero_optimization.max_live_parameters", H, "Config.DeprecatedAliases"},
    {"zero_optimization.max_reuse_distance", H, "Config.DeprecatedAliases"},
    {"zero_optimization.gather_16bit_weights_on_model_save", H, "Config.DeprecatedAliases"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", H, "Config.DeprecatedAliases"},
    {"zero_optimization.stage", H, "RunKeys.ZeroChecksFollowStageAndUntestedOptimizer"},
    {"zero_optimization.overlap_comm", H, "DataParallel.TwoRanksOverlappedWithAccumulation"},
    {"zero_optimization.contiguous_gradients", N, "gradients always live in flat buffers (stages 0-1) or are copied into per-bucket buffers as autograd produces them (stages 2-3), which is DeepSpeed's contiguous_gradients behaviour; the results are the same either way"},
    {"zero_optimization.reduce_bucket_size", H, "BucketPlan.LargeBucketIsOneBucketAndTinyBucketIsOneParameterEach"},
    {"zero_optimization.allgather_bucket_size", H, "ZeroComm.AllgatherBucketSizeSetsTheGatherCalls"},
    {"zero_optimization.allgather_partitions", H, "ZeroComm.AllgatherPartitionsFalseBroadcasts"},
    {"zero_optimization.reduce_scatter", H, "ZeroComm.ReduceScatterFalseAllReducesTwoRanks"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", N, "xtrain reduces each bucket with one collective over the data-parallel group"},
    {"zero_optimization.load_from_fp32_weights", H, "ZeroComm.LoadFromFp32WeightsFalseRebuildsTheMaster"},
    {"zero_optimization.elastic_checkpoint", N, "xtrain checkpoints always load at any number of ranks"},
    {"zero_optimization.round_robin_gradients", N, "it only reorders DeepSpeed's gradient copies for CPU offload; the result is the same"},
    {"zero_optimization.ignore_unused_parameters", H, "ZeroComm.IgnoreUnusedParametersFalseNamesTheParameter"},
    {"zero_optimization.sub_group_size", H, "NvmeOptimizerState.FilesHoldWhatTheInMemoryOptimizerHolds"},
    {"zero_optimization.stage3_prefetch_bucket_size", H, "ZeroStage3.TwoRanksMatchStageZero"},
    {"zero_optimization.stage3_param_persistence_threshold", H, "ZeroStage3.TwoRanksMatchStageZero"},
    {"zero_optimization.stage3_model_persistence_threshold", N, "xtrain does not cap the persistent parameters"},
    {"zero_optimization.stage3_max_live_parameters", H, "ZeroStage3.TwoRanksMatchStageZero"},
    {"zero_optimization.stage3_max_reuse_distance", N, kStage3Release},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", N, "`xtrain ckpt consolidate` writes the whole model from any checkpoint"},
    {"zero_optimization.stage3_module_granularity_threshold", N, "xtrain gathers stage-3 parameters per transformer block, never per small module"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", N, "xtrain gathers stage-3 parameters with all-gather"},
    {"zero_optimization.zero_hpz_partition_size", R, ""},
    {"zero_optimization.zero_quantized_weights", R, ""},
    {"zero_optimization.zero_quantized_nontrainable_weights", R, ""},
    {"zero_optimization.zero_quantized_gradients", R, ""},
    {"zero_optimization.mics_shard_size", R, ""},
    {"zero_optimization.memory_efficient_linear", N, "xtrain's linear layers save only their input for backward already"},
    {"zero_optimization.offload_optimizer.device", H, "NvmeOffload.StagesOneAndTwoMatchInMemoryAtOneAndTwoRanks"},
    {"zero_optimization.offload_optimizer.nvme_path", H, "NvmeOptimizerState.BadPathOrTooLittleSpaceIsAUsageError"},
    {"zero_optimization.offload_optimizer.pin_memory", N, kNoPin},
    {"zero_optimization.offload_optimizer.buffer_count", N, kNvmeBuffers},
    {"zero_optimization.offload_optimizer.pipeline_read", N, "NVMe reads overlap the step unless aio.overlap_events is false"},
    {"zero_optimization.offload_optimizer.pipeline_write", N, "NVMe writes overlap the step unless aio.overlap_events is false"},
    {"zero_optimization.offload_optimizer.fast_init", N, "xtrain creates the NVMe state files in one pass already"},
    {"zero_optimization.offload_optimizer.ratio", R, "only 1.0 (the whole step on the CPU)"},
    {"zero_optimization.offload_param.device", H, "ZeroStage3.NvmeOffloadTwoRanksMatchesInMemory"},
    {"zero_optimization.offload_param.nvme_path", H, "ZeroStage3.NvmeOffloadTwoRanksMatchesInMemory"},
    {"zero_optimization.offload_param.pin_memory", N, kNoPin},
    {"zero_optimization.offload_param.buffer_count", N, kParamBuffers},
    {"zero_optimization.offload_param.buffer_size", N, kParamBuffers},
    {"zero_optimization.offload_param.max_in_cpu", N, kParamBuffers},
    // aio
    {"aio.thread_count", H, "Config.DeprecatedAliases"},
    {"aio.block_size", H, "NvmeUringFile.RoundTripWithUnalignedTailsAndBuffers"},
    {"aio.queue_depth", H, "NvmeUringFile.RoundTripWithUnalignedTailsAndBuffers"},
    {"aio.intra_op_parallelism", N, "xtrain runs one io_uring per NVMe state file"},
    {"aio.single_submit", H, "NvmeUringFile.RoundTripWithUnalignedTailsAndBuffers"},
    {"aio.overlap_events", H, "NvmeUringFile.RoundTripWithUnalignedTailsAndBuffers"},
    {"aio.use_gds", R, "xtrain reads and writes NVMe through io_uring; GPUDirect Storage needs CUDA and cuFile"},
    // activation checkpointing
    {"activation_checkpointing.enabled", H, "GptCheckpointing.EachCheckpointedBlockIsOneGraphNode"},
    {"activation_checkpointing.partition_activations", H, "PartitionActivations.TwoTensorParallelRanksKeepHalfAndGatherInBackward"},
    {"activation_checkpointing.cpu_checkpointing", H, "Checkpoint.CpuCheckpointingGivesTheSameGradients"},
    {"activation_checkpointing.contiguous_memory_optimization", N, "xtrain saves one input tensor per checkpointed block; there is nothing to pack"},
    {"activation_checkpointing.number_checkpoints", H, "Checkpoint.NumberCheckpointsSelectsTheFirstBlocks"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", N, "it only synchronises the device at block boundaries (a debugging aid); results are the same"},
    {"activation_checkpointing.profile", N, "xtrain times the step's stages with wall_clock_breakdown, not per checkpointed block"},
    // monitors
    {"tensorboard.enabled", H, "Sinks.FoldersFollowTheMonitorKeys"},
    {"tensorboard.output_path", H, "Sinks.FoldersFollowTheMonitorKeys"},
    {"tensorboard.job_name", H, "Sinks.FoldersFollowTheMonitorKeys"},
    {"csv_monitor.enabled", H, "Sinks.FoldersFollowTheMonitorKeys"},
    {"csv_monitor.output_path", H, "Sinks.FoldersFollowTheMonitorKeys"},
    {"csv_monitor.job_name", H, "Sinks.FoldersFollowTheMonitorKeys"},
    {"wandb.enabled", R, "tensorboard or csv_monitor"},
    {"wandb.group", N, kNoWandb},
    {"wandb.team", N, kNoWandb},
    {"wandb.project", N, kNoWandb},
    {"comet.enabled", R, "tensorboard or csv_monitor"},
    {"comet.samples_log_interval", N, kNoComet},
    {"comet.project", N, kNoComet},
    {"comet.workspace", N, kNoComet},
    {"comet.api_key", N, kNoComet},
    {"comet.experiment_name", N, kNoComet},
    {"comet.experiment_key", N, kNoComet},
    {"comet.online", N, kNoComet},
    {"comet.mode", N, kNoComet},
    {"flops_profiler.enabled", H, "RunMonitor.ProfileStepLearnsFlopsPerUnit"},
    {"flops_profiler.profile_step", H, "RunMonitor.ProfileStepLearnsFlopsPerUnit"},
    {"flops_profiler.module_depth", H, "Flops.ConvolutionAndBroadcastMatmul"},
    {"flops_profiler.top_modules", H, "Flops.ConvolutionAndBroadcastMatmul"},
    {"flops_profiler.detailed", H, "Flops.ConvolutionAndBroadcastMatmul"},
    {"flops_profiler.output_file", H, "RunMonitor.ProfileStepLearnsFlopsPerUnit"},
    {"flops_profiler.recompute_fwd_factor", H, "Flops.ConvolutionAndBroadcastMatmul"},
    {"comms_logger.enabled", R, "wall_clock_breakdown times the reduction stage"},
    {"comms_logger.verbose", N, kNoCommsLog},
    {"comms_logger.prof_all", N, kNoCommsLog},
    {"comms_logger.debug", N, kNoCommsLog},
    // curriculum
    {"curriculum_learning.enabled", H, "Curriculum.TruncatesTextBatchesToTheFirstPositions"},
    {"curriculum_learning.curriculum_type", H, "Curriculum.BadOptionsNameTheKey"},
    {"curriculum_learning.min_difficulty", H, "Curriculum.FixedDiscreteAndTheFreezeAtMaxDifficulty"},
    {"curriculum_learning.max_difficulty", H, "Curriculum.FixedDiscreteAndTheFreezeAtMaxDifficulty"},
    {"curriculum_learning.schedule_type", H, "Curriculum.RootSchedulesMatchTheExactClosedFormAtEveryStep"},
    {"curriculum_learning.schedule_config.total_curriculum_step", H, "Curriculum.RootSchedulesMatchTheExactClosedFormAtEveryStep"},
    {"curriculum_learning.schedule_config.difficulty_step", H, "Curriculum.RootSchedulesMatchTheExactClosedFormAtEveryStep"},
    {"curriculum_learning.schedule_config.root_degree", H, "Curriculum.RootSchedulesMatchTheExactClosedFormAtEveryStep"},
    {"curriculum_learning.schedule_config.difficulty", H, "Curriculum.FixedDiscreteAndTheFreezeAtMaxDifficulty"},
    {"curriculum_learning.schedule_config.max_step", H, "Curriculum.FixedDiscreteAndTheFreezeAtMaxDifficulty"},
    // pipeline, tensor parallel, checkpoint
    {"pipeline.stages", H, "ModelParallelTrainer.PipelineTwoAndFourStagesTrainLikeOneRank"},
    {"pipeline.partition", H, "PipelinePartition.ByParameters"},
    {"pipeline.schedule", H, "PipelineSchedule.OneFOneBHandWritten"},
    {"pipeline.seed_layers", N, "xtrain seeds every layer from xtrain.seed, whatever the stage"},
    {"pipeline.activation_checkpoint_interval", H, "PipelineCheckpointInterval.GroupsOfBlocksRecomputeWithTheSameGradients"},
    {"pipeline.pipe_partitioned", N, "xtrain sends whole activations between stages; the result is the same"},
    {"pipeline.grad_partitioned", N, "xtrain sends whole gradients between stages; the result is the same"},
    {"tensor_parallel.size", H, "ModelParallelTrainer.TensorParallelTwoAndFourTrainLikeOneRank"},
    {"tensor_parallel.autotp_size", H, "EngineKeys.AutotpSizeIsTheTensorParallelSize"},
    {"checkpoint.tag_validation", H, "TagValidation.TwoRanksSavingDifferentTagsFailWarnOrPass"},
    {"checkpoint.load_universal", N, "xtrain checkpoints always load at any parallel layout"},
    {"checkpoint.use_node_local_storage", H, "NodeLocal.EachNodeKeepsItsPartAndAResumeGathersThem"},
    {"checkpoint.parallel_write.pipeline_stage", N, "every rank writes its own shard already"},
    // xtrain
    {"xtrain.model.type", H, "Factory.ForwardCallableRunsEachModel"},
    {"xtrain.model.layers", H, "Factory.DefaultGptParameterCountIsTheClosedForm"},
    {"xtrain.model.d_model", H, "Factory.DefaultGptParameterCountIsTheClosedForm"},
    {"xtrain.model.heads", H, "Gpt.MatchesPyTorchLogitsLossAndEveryGradient"},
    {"xtrain.model.seq_len", H, "Factory.DefaultGptParameterCountIsTheClosedForm"},
    {"xtrain.model.vocab", H, "Factory.DefaultGptParameterCountIsTheClosedForm"},
    {"xtrain.model.dropout", H, "Gpt.DropoutActsInTrainModeOnlyAndEvalEqualsNoDropout"},
    {"xtrain.model.tie_embeddings", H, "Factory.DefaultGptParameterCountIsTheClosedForm"},
    {"xtrain.model.attention.type", H, "MakeAttention.BuildsWhatTheConfigAsks"},
    {"xtrain.model.attention.windows", H, "MakeAttention.BuildsWhatTheConfigAsks"},
    {"xtrain.model.attention.kernel", H, "MakeAttention.BuildsWhatTheConfigAsks"},
    {"xtrain.model.hidden", H, "Factory.ForwardCallableRunsEachModel"},
    {"xtrain.model.num_classes", H, "Factory.ImageModelsNeedSizesFromTheDataset"},
    {"xtrain.model.in_features", H, "Factory.ImageModelsNeedSizesFromTheDataset"},
    {"xtrain.model.args", H, "ModelRegistry.PluginModelAndDatasetTrainThroughTheRunLoop"},
    {"xtrain.model.init_from", H, "SafetensorsInit.InitFromKeysTrainThroughTheRun"},
    {"xtrain.model.init_strict", H, "SafetensorsInit.InitFromKeysTrainThroughTheRun"},
    {"xtrain.data.type", H, "RealData.Mnist"},
    {"xtrain.data.path", H, "TextData.MissingFilesSayWhatToDo"},
    {"xtrain.data.val_fraction", H, "TextData.TooShortSplitNamesTheNumbers"},
    {"xtrain.data.prefetch", H, "Loader.PrefetchDoesNotChangeTheBatches"},
    {"xtrain.data.ordering.enabled", H, "DataOrderingTrainer.OrderedRunResumesExactlyAndCachesItsScores"},
    {"xtrain.data.ordering.scorer", H, "DataOrderingTrainer.LossScorerIsTheReferenceModelsCrossEntropy"},
    {"xtrain.data.ordering.reference_checkpoint", H, "DataOrderingTrainer.LossScorerIsTheReferenceModelsCrossEntropy"},
    {"xtrain.data.ordering.score_samples", H, "DifficultySampler.ScoreSubsetIsDistinctSortedAndBounded"},
    {"xtrain.data.ordering.random_mix", H, "DifficultySampler.OrderedPositionsAreNonDecreasingAndTheMixIsBinomial"},
    {"xtrain.data.ordering.folds", H, "DifficultySampler.FoldsAreRoundRobinDealsOfTheSortedOrder"},
    {"xtrain.data.ordering.ordering_epochs", H, "DifficultySampler.ResumeContinuesExactlyAndLaterEpochsAreUniformShuffles"},
    {"xtrain.data.label", H, "CsvDataset.SplitsAndStandardisesValidationWithTrainingStatistics"},
    {"xtrain.data.features", H, "CsvDataset.ErrorsNameTheFileLineAndColumn"},
    {"xtrain.data.image_size", H, "Vit.ImageSizeResizesBilinearlyAsTorch"},
    {"xtrain.data.args", H, "ModelRegistry.PluginModelAndDatasetTrainThroughTheRunLoop"},
    {"xtrain.loss.type", H, "Losses.MakeLossFlattensSequences"},
    {"xtrain.loss.label_smoothing", H, "Losses.MakeLossFlattensSequences"},
    {"xtrain.loss.gamma", H, "Losses.MakeLossFlattensSequences"},
    {"xtrain.loss.alpha", H, "Losses.MakeLossFlattensSequences"},
    {"xtrain.param_groups", H, "ParamGroups.TwoGroupsMatchTorchAdamWAtStage0And2"},
    {"xtrain.param_groups[].params", H, "ParamGroups.GlobsFirstMatchWinsAndUnmatchedKeepDefaults"},
    {"xtrain.param_groups[].lr_scale", H, "ParamGroups.TwoGroupsMatchTorchAdamWAtStage0And2"},
    {"xtrain.param_groups[].weight_decay", H, "ParamGroups.TwoGroupsMatchTorchAdamWAtStage0And2"},
    {"xtrain.steps", H, "Trainer.RunDirectoryContentsAndPruning"},
    {"xtrain.eval_interval", H, "RunKeys.TrainingLoopKeysShapeTheRun"},
    {"xtrain.eval_batches", H, "RunKeys.TrainingLoopKeysShapeTheRun"},
    {"xtrain.save_interval", H, "Trainer.RunDirectoryContentsAndPruning"},
    {"xtrain.keep_checkpoints", H, "Trainer.RunDirectoryContentsAndPruning"},
    {"xtrain.log_interval", H, "RunKeys.TrainingLoopKeysShapeTheRun"},
    {"xtrain.output", H, "RunKeys.TrainingLoopKeysShapeTheRun"},
    {"xtrain.name", H, "RunKeys.TrainingLoopKeysShapeTheRun"},
    {"xtrain.threads", H, "Threads.DecideTakesConfigThenOmpNumThreadsThenCoresPerLocalRank"},
    {"xtrain.seed", H, "Trainer.ResumeIsExact"},
    {"xtrain.generate.tokens", H, "Generate.SamplingMatchesPyTorchAndDependsOnlyOnTheSeed"},
    {"xtrain.generate.prompt", H, "Generate.SamplingMatchesPyTorchAndDependsOnlyOnTheSeed"},
    {"xtrain.generate.temperature", H, "Generate.SamplingMatchesPyTorchAndDependsOnlyOnTheSeed"},
    {"xtrain.generate.top_k", H, "Generate.SamplingMatchesPyTorchAndDependsOnlyOnTheSeed"},
    {"xtrain.comm.backend", H, "Communicator.CollectivesTwoRanks"},
    {"xtrain.comm.timeout_seconds", H, "CommTimeout.RankThatSkipsACollectiveIsNamed"},
    {"xtrain.monitor.peak_tflops", H, "RunMonitor.StepMetricsEverywhere"},
    {"xtrain.monitor.histogram_interval", H, "RunMonitor.StepMetricsEverywhere"},
    {"xtrain.monitor.flush_secs", H, "TensorBoard.BackgroundFlushMakesRecordsVisibleWhileOpen"},
    {"xtrain.local_sgd.sync_every", H, "LocalSgd.TwoRanksMatchDataParallelAndNesterovWithoutMomentumAndCountBytes"},
    {"xtrain.local_sgd.outer_optimizer.type", H, "LocalSgd.TwoRanksMatchDataParallelAndNesterovWithoutMomentumAndCountBytes"},
    {"xtrain.local_sgd.outer_optimizer.lr", H, "LocalSgd.NesterovOuterStepMatchesTorchSgd"},
    {"xtrain.local_sgd.outer_optimizer.momentum", H, "LocalSgd.NesterovOuterStepMatchesTorchSgd"},
    {"xtrain.python.memory_pool", N, "only xtrain.initialize (Python) reads it, tested by tests/python/test_kernel_inject.py; "
                                     "the xtrain program always installs the pool"},
    {"xtrain.python.kernel_inject", N, "only xtrain.initialize (Python) reads it, tested by tests/python/test_kernel_inject.py; "
                                       "xtrain's own models always run xtrain's kernels"},
};

}  // namespace

const std::vector<KeyStatus>& key_statuses() { return kTable; }

std::string file_key(const std::string& doc_key) {
  std::string out;
  bool in_paren = false;
  for (size_t i = 0; i < doc_key.size(); ++i) {
    const char c = doc_key[i];
    if (c == '(') in_paren = true;
    if (!in_paren) out += c;
    if (c == ')') in_paren = false;
  }
  // "params (Lamb).x" left "params .x": drop the space before the dropped group.
  std::string clean;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == ' ' && (i + 1 == out.size() || out[i + 1] == '.')) continue;
    clean += out[i];
  }
  return clean;
}

const KeyStatus* find_key_status(const std::string& key) {
  static const auto index = [] {
    std::unordered_map<std::string, const KeyStatus*> m;
    for (const auto& s : kTable) {
      m.emplace(s.key, &s);
      m.emplace(file_key(s.key), &s);  // the first variant wins; variants agree where they share a key
    }
    return m;
  }();
  auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

const char* state_name(KeyState state) {
  switch (state) {
    case KeyState::honoured: return "honoured";
    case KeyState::refused: return "refused";
    case KeyState::no_effect: return "no effect";
  }
  return "?";
}

std::string no_effect_line(const KeyStatus& status) {
  return "config: " + file_key(status.key) + " has no effect here: " + status.detail;
}

std::string refused_message(const KeyStatus& status) {
  std::string m = "not supported yet: " + file_key(status.key);
  if (*status.detail) m += std::string(" (") + status.detail + ")";
  return m;
}

}  // namespace xtrain::config
