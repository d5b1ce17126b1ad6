// xtrain._C's engine part, behind python/xtrain/engine.py: the config reader (errors become
// xtrain.ConfigError, a ValueError, with the reader's did-you-mean text), the data-parallel group
// from the launcher's variables, the C++ Engine over a Python module's named parameters (the same
// tensors: the strategy re-points their storage and gradients into its flat buffers), and
// checkpoints in the layout `xtrain train` writes (<run_dir>/checkpoints/<tag>/).
// The GIL is released around everything that runs autograd or collectives.
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/base/memory_pool.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/comm/rank_info.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/monitor/sinks.h"
#include "xtrain/python/bindings.h"
#include "xtrain/run/checkpoint_merge.h"
#include "xtrain/run/node_local_checkpoint.h"
#include "xtrain/zero/stage3_units.h"
#include "xtrain/zero/strategy.h"

namespace py = pybind11;

namespace xtrain::python {

namespace {

using NamedList = std::vector<std::pair<std::string, at::Tensor>>;

// The process's data-parallel group: set by init_distributed(), world 1 until then.
std::shared_ptr<comm::Communicator>& process_group() {
  static std::shared_ptr<comm::Communicator> group;
  return group;
}

int world_size() { return process_group() ? process_group()->size() : 1; }

// A resolved config: `source` is a path, or JSON text when `is_text`.
std::shared_ptr<config::Config> load_config(const std::string& source, bool is_text, int64_t world) {
  config::LoadOptions options;
  options.world_size = world > 0 ? world : world_size();
  options.quiet = true;
  auto loaded = is_text ? config::load_text(source, options, "config") : config::load(source, options);
  return std::make_shared<config::Config>(std::move(loaded.config));
}

std::pair<int, int> init_distributed(double timeout_s) {
  auto& group = process_group();
  if (!group) {
    const comm::RankInfo info = comm::rank_info_from_env();
    group = info.world_size > 1 ? comm::Communicator::create(info, comm::CommOptions{}, timeout_s)
                                : comm::Communicator::single();
  }
  return {group->rank(), group->size()};
}

py::dict step_stats(const StepStats& s) {
  py::dict d;
  d["step"] = s.step;
  d["loss"] = s.loss;
  d["grad_norm"] = s.grad_norm;
  d["lr"] = s.lr;
  d["skipped"] = s.skipped;
  d["loss_scale"] = s.loss_scale;
  return d;
}

// ZeRO stage 3 finds its units in a torch::nn::Module (zero/stage3_units.h): a C++ mirror of the
// Python module's tree holds the same parameter tensors under the same dotted names, with a
// torch::nn::Sequential where Python has an nn.Sequential or nn.ModuleList, so the children of those
// become units. The mirror's modules never run; Python routes each unit's forward through run_unit.
struct HolderImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) { return x; }
};

struct Mirror {
  std::shared_ptr<torch::nn::Module> root;
  std::map<const torch::nn::Module*, std::string> path_of;
};

std::shared_ptr<torch::nn::Module> child_of(Mirror& m, std::map<std::string, std::shared_ptr<torch::nn::Module>>& nodes,
                                            const std::string& parent, const std::string& name,
                                            const std::set<std::string>& sequences) {
  const std::string path = parent.empty() ? name : parent + "." + name;
  auto it = nodes.find(path);
  if (it != nodes.end()) return it->second;
  auto& node = nodes.at(parent);
  std::shared_ptr<torch::nn::Module> made;
  if (auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(node.get())) {
    auto holder = std::make_shared<HolderImpl>();  // a Sequential's children run: they need a forward
    seq->push_back(std::string(name), holder);
    made = holder;
  } else {
    made = sequences.count(path) ? std::shared_ptr<torch::nn::Module>(std::make_shared<torch::nn::SequentialImpl>())
                                 : std::make_shared<HolderImpl>();
    node->register_module(name, made);
  }
  m.path_of[made.get()] = path;
  return nodes.emplace(path, made).first->second;
}

Mirror build_mirror(const NamedList& params, const std::set<std::string>& sequences) {
  Mirror m;
  if (sequences.count("")) {
    m.root = std::make_shared<torch::nn::SequentialImpl>();
  } else {
    m.root = std::make_shared<HolderImpl>();
  }
  std::map<std::string, std::shared_ptr<torch::nn::Module>> nodes{{"", m.root}};
  for (const auto& [name, tensor] : params) {
    std::string parent;
    size_t start = 0;
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
      const std::string part = name.substr(start, dot - start);
      child_of(m, nodes, parent, part, sequences);
      parent = parent.empty() ? part : parent + "." + part;
      start = dot + 1;
    }
    nodes.at(parent)->register_parameter(name.substr(start), tensor);
  }
  return m;
}

std::unique_ptr<Engine> make_engine(const NamedList& params, const config::Config& config,
                                    const std::shared_ptr<torch::nn::Module>& mirror) {
  if (mirror) return std::make_unique<Engine>(mirror, Engine::LossFn{}, config, process_group());
  return std::make_unique<Engine>(zero::NamedParams(params.begin(), params.end()), Engine::LossFn{}, config,
                                  process_group());
}

// Engine plus what the Python side's checkpoints and stage-3 units need.
class PyEngine {
 public:
  // `sequences`: the module paths of the model's nn.Sequential / nn.ModuleList ("" the model itself);
  // used with zero_optimization.stage 3.
  PyEngine(const NamedList& params, std::shared_ptr<config::Config> config, const std::set<std::string>& sequences)
      : config_(std::move(config)) {
    if (config_->zero_optimization.stage == 3) {
      mirror_ = build_mirror(params, sequences);
      // The strategy's own plan (the same call, before it partitions: sizes decide what is a unit).
      const auto& z = config_->zero_optimization;
      const auto plan = zero::plan_units(zero::NamedParams(params.begin(), params.end()), mirror_.root,
                                         z.stage3_param_persistence_threshold, z.reduce_bucket_size);
      for (size_t u = 0; u < plan.partitioned; ++u) units_.emplace_back(mirror_.path_of.at(plan.modules[u].get()), u);
    }
    engine_ = make_engine(params, *config_, mirror_.root);
    if (!mirror_.root) return;
    events_ = dynamic_cast<zero::UnitEvents*>(const_cast<zero::Strategy*>(&engine_->strategy()));
    TORCH_INTERNAL_ASSERT(events_, "stage 3 without a Stage3Strategy");
  }

  // Stage 3: (module path, unit) of every partitioned unit, and a unit's forward with its parameters gathered.
  const std::vector<std::pair<std::string, size_t>>& units() const { return units_; }
  at::Tensor run_unit(size_t u, const zero::UnitFn& inner, const at::Tensor& x) {
    return events_->run_unit(u, inner, x);
  }

  Engine& engine() { return *engine_; }
  const config::Config& config() const { return *config_; }

  // metrics.jsonl in run_dir, TensorBoard and CSV as the config's monitor keys say (rank 0 only).
  void open_metrics(const std::string& run_dir) {
    if (engine_->dp().rank() != 0) return;
    sinks_ = monitor::make_sinks(config_->tensorboard, config_->csv_monitor, run_dir, 10.0, config::to_json(*config_),
                                 engine_->global_steps());
  }
  // The last optimizer step's scalars, under the names `xtrain train` writes.
  void write_metrics(double samples_per_s) {
    if (!sinks_) return;
    const StepStats& s = engine_->last_step();
    std::map<std::string, double> m = {{"train/loss", s.loss},
                                       {"train/lr", s.lr},
                                       {"train/grad_norm", s.grad_norm},
                                       {"train/skipped_steps", static_cast<double>(engine_->skipped_steps())},
                                       {"train/samples", static_cast<double>(engine_->global_samples())},
                                       {"train/loss_scale", s.loss_scale}};
    if (samples_per_s > 0) m["train/samples_per_s"] = samples_per_s;
    sinks_->write(s.step, m);
  }
  void close_metrics() { sinks_.reset(); }

  // Every rank calls it; rank 0 commits, or with checkpoint.use_node_local_storage on several nodes
  // each node's local rank 0 commits its node's part under its own run_dir (node_local_checkpoint.h).
  // `buffers` and `client_state` are rank 0's to write.
  std::string save(const std::string& run_dir, const std::string& tag, const NamedList& buffers,
                   const std::string& client_state) {
    namespace fs = std::filesystem;
    const std::string root = (fs::path(run_dir) / "checkpoints").string();
    const std::string t = tag.empty() ? "global_step" + std::to_string(engine_->global_steps()) : tag;
    auto& dp = engine_->dp();
    checkpoint::CheckpointWriter writer(root, t, dp.rank());
    engine_->save_checkpoint(writer);
    if (dp.rank() == 0) {
      if (!buffers.empty()) writer.write_tensors("buffers.pt", buffers);
      writer.write_text("client_state.pkl", client_state);
      writer.write_text("config.json", config::to_json(*config_));
    }
    writer.finish_rank();
    const comm::RankInfo rank = rank_of(dp);
    commit_checkpoint({*config_, rank, dp}, writer, root);
    dp.barrier();
    return (fs::path(root) / t).string();
  }

  // (folder, client_state bytes, buffers) of <run_dir>/checkpoints/<tag or latest>. With node-local
  // storage on several nodes: node 0's latest, gathered from every node's run_dir first.
  std::tuple<std::string, std::string, NamedList> load(const std::string& run_dir, const std::string& tag,
                                                        bool load_optimizer) {
    namespace fs = std::filesystem;
    std::string root = (fs::path(run_dir) / "checkpoints").string();
    auto& dp = engine_->dp();
    const comm::RankInfo rank = rank_of(dp);
    const NodeLocalRun local{*config_, rank, dp};
    const bool node_local = node_local_storage(local);
    if (node_local) {
      root = gather_node_local(local, root);
    } else {
      XTRAIN_USAGE_CHECK(!tag.empty() || !checkpoint::latest_tag(root).empty(), "load_checkpoint: ", run_dir,
                         " has no checkpoint (", root, "/latest is missing)");
    }
    checkpoint::CheckpointReader reader(root, node_local ? "" : tag);
    XTRAIN_USAGE_CHECK(tag.empty() || reader.tag() == tag, "load_checkpoint(tag=", tag, "): with ",
                       "checkpoint.use_node_local_storage on several nodes the run resumes from node 0's latest, ",
                       reader.tag());
    engine_->load_checkpoint(reader, load_optimizer);
    NamedList buffers;
    if (reader.has_file("buffers.pt")) buffers = reader.read_tensors("buffers.pt");
    std::string client = reader.has_file("client_state.pkl") ? reader.read_text("client_state.pkl") : "";
    std::string where = node_local ? (fs::path(run_dir) / "checkpoints" / reader.tag()).string() : reader.dir();
    if (node_local) remove_gathered(local, root);
    return {where, client, buffers};
  }

 private:
  // The launcher's view of this process (its node: LOCAL_RANK, LOCAL_WORLD_SIZE), over `dp`, which is
  // every rank: the Python engine has no tensor or pipeline parallelism.
  static comm::RankInfo rank_of(const comm::Communicator& dp) {
    comm::RankInfo rank = comm::rank_info_from_env();
    rank.rank = dp.rank();
    rank.world_size = dp.size();
    return rank;
  }

  std::shared_ptr<config::Config> config_;
  Mirror mirror_;
  std::unique_ptr<Engine> engine_;
  std::vector<std::pair<std::string, size_t>> units_;
  zero::UnitEvents* events_ = nullptr;
  std::unique_ptr<monitor::MultiSink> sinks_;
};

// Whole fp32 parameters (and buffers) of a checkpoint: <run_dir>/checkpoints/<tag or latest>.
NamedList read_state(const std::string& run_dir, const std::string& tag) {
  namespace fs = std::filesystem;
  fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::exists(root)) root = run_dir;  // a checkpoints root given directly
  checkpoint::CheckpointReader reader(root.string(), tag);
  NamedList out = merge_checkpoint(reader, false).model;
  if (reader.has_file("buffers.pt")) {
    for (auto& b : reader.read_tensors("buffers.pt")) out.push_back(std::move(b));
  }
  return out;
}

void bind_config(py::module_& m) {
  py::class_<config::Config, std::shared_ptr<config::Config>>(m, "Config")
      .def_property_readonly("train_batch_size", [](const config::Config& c) { return *c.engine.train_batch_size; })
      .def_property_readonly("train_micro_batch_size_per_gpu",
                             [](const config::Config& c) { return *c.engine.train_micro_batch_size_per_gpu; })
      .def_property_readonly("gradient_accumulation_steps",
                             [](const config::Config& c) { return *c.engine.gradient_accumulation_steps; })
      .def_property_readonly("gradient_clipping", [](const config::Config& c) { return c.engine.gradient_clipping; })
      .def_property_readonly("bf16", [](const config::Config& c) { return c.bf16.enabled; })
      .def_property_readonly("fp16", [](const config::Config& c) { return c.fp16.enabled; })
      .def_property_readonly("zero_stage", [](const config::Config& c) { return c.zero_optimization.stage; })
      .def_property_readonly("dp_world_size", [](const config::Config& c) { return c.dp_world_size; })
      .def_property_readonly("seed", [](const config::Config& c) { return c.trainer.seed; })
      .def_property_readonly("kernel_inject", [](const config::Config& c) { return c.python.kernel_inject; })
      .def_property_readonly("memory_pool", [](const config::Config& c) { return c.python.memory_pool; })
      // Off for DeepSpeed's model_parameters=model.parameters(): every tensor decays, as torch.optim does.
      .def_property(
          "no_decay_for_bias_and_norm", [](const config::Config& c) { return c.optimizer.no_decay_for_bias_and_norm; },
          [](config::Config& c, bool on) { c.optimizer.no_decay_for_bias_and_norm = on; })
      .def("to_json", [](const config::Config& c) { return config::to_json(c); });
  m.def("load_config", &load_config, py::arg("source"), py::arg("is_text"), py::arg("world_size") = 0,
        "Reads a ds_config.json (a path, or JSON text) with the checks and messages of `xtrain train`.");
}

void bind_engine_class(py::module_& m) {
  using E = PyEngine;
  py::class_<E>(m, "Engine")
      .def(py::init<const NamedList&, std::shared_ptr<config::Config>, const std::set<std::string>&>(),
           py::arg("params"), py::arg("config"), py::arg("sequences") = std::set<std::string>{},
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("units", &E::units)
      .def("run_unit", &E::run_unit, py::arg("unit"), py::arg("inner"), py::arg("x"),
           py::call_guard<py::gil_scoped_release>())
      .def("backward", [](E& e, const at::Tensor& loss) { e.engine().backward(loss); },
           py::call_guard<py::gil_scoped_release>())
      .def("step", [](E& e) { return e.engine().step(); }, py::call_guard<py::gil_scoped_release>())
      .def("is_gradient_accumulation_boundary", [](E& e) { return e.engine().is_gradient_accumulation_boundary(); })
      .def_property_readonly("global_steps", [](E& e) { return e.engine().global_steps(); })
      .def_property_readonly("global_samples", [](E& e) { return e.engine().global_samples(); })
      .def_property_readonly("micro_steps", [](E& e) { return e.engine().micro_steps(); })
      .def_property_readonly("skipped_steps", [](E& e) { return e.engine().skipped_steps(); })
      .def_property_readonly("lr", [](E& e) { return e.engine().current_lr(); })
      .def_property_readonly("last_step", [](E& e) { return step_stats(e.engine().last_step()); })
      .def_property_readonly("loss_scale", [](E& e) { return e.engine().loss_scaler().scale(); })
      .def_property_readonly("param_dtype", [](E& e) { return std::string(c10::toString(e.engine().precision().param_dtype)); })
      .def_property_readonly("dp_rank", [](E& e) { return e.engine().dp().rank(); })
      .def_property_readonly("dp_world_size", [](E& e) { return e.engine().dp().size(); })
      .def_property_readonly("describe", [](E& e) { return e.engine().strategy().describe(); })
      .def("open_metrics", &E::open_metrics, py::arg("run_dir"))
      .def("write_metrics", &E::write_metrics, py::arg("samples_per_s") = 0.0)
      .def("close_metrics", &E::close_metrics)
      .def_property_readonly("monitor_enabled",
                             [](E& e) { return e.config().tensorboard.enabled || e.config().csv_monitor.enabled; })
      .def_property_readonly("monitor_dir", [](E& e) {
        const auto& c = e.config();
        return c.tensorboard.enabled ? c.tensorboard.output_path : c.csv_monitor.output_path;
      })
      .def("set_lr_override", [](E& e, double lr) { e.engine().set_lr_override(lr); })
      .def("full_parameters", [](E& e) { return NamedList(e.engine().full_parameters()); },
           py::call_guard<py::gil_scoped_release>())
      .def("save", &E::save, py::arg("run_dir"), py::arg("tag"), py::arg("buffers"), py::arg("client_state"),
           py::call_guard<py::gil_scoped_release>())
      .def("load",
           [](E& e, const std::string& dir, const std::string& tag, bool opt) {
             std::tuple<std::string, std::string, NamedList> r;
             {
               py::gil_scoped_release release;
               r = e.load(dir, tag, opt);
             }
             return py::make_tuple(std::get<0>(r), py::bytes(std::get<1>(r)), std::get<2>(r));
           },
           py::arg("run_dir"), py::arg("tag"), py::arg("load_optimizer"));
}

}  // namespace

void bind_engine(py::module_& m) {
  py::register_exception<UsageError>(m, "ConfigError", PyExc_ValueError);
  bind_config(m);
  bind_engine_class(m);
  m.def("init_distributed", &init_distributed, py::arg("timeout_s") = 0.0, py::call_guard<py::gil_scoped_release>(),
        "Joins the data-parallel group from the launcher's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...).");
  m.def("world_size", &world_size);
  m.def(
      "install_memory_pool", [](bool enabled) { memory_pool::install(base::MemoryPoolOptions{enabled}); },
      py::arg("enabled"), "xtrain's caching CPU allocator as LibTorch's (base/memory_pool.h), or the one before it.");
  m.def("memory_pool_stats", [] {
    const auto s = memory_pool::stats();
    return std::map<std::string, int64_t>{{"installed", memory_pool::installed() ? 1 : 0},
                                          {"allocations", s.allocations},
                                          {"cache_hits", s.cache_hits},
                                          {"os_allocations", s.os_allocations},
                                          {"os_allocations_1mb", s.os_allocations_at_least(1 << 20)}};
  });
  m.def("barrier", [] { if (process_group()) process_group()->barrier(); }, py::call_guard<py::gil_scoped_release>());
  m.def("read_state", &read_state, py::arg("run_dir"), py::arg("tag") = "",
        "Whole fp32 parameters and buffers of a checkpoint, by name.");
}

}  // namespace xtrain::python
