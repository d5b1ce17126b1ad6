// `xtrain serve --run DIR [--int8] [--host H] [--port P] [--token T] ...`: serves a trained run over
// HTTP (serve/server.h). This main loads the run (its config, latest checkpoint and tokenizer; with
// --int8 the compressed model and quant.json of `xtrain compress`, decoded on the int8 kernels),
// prints the address (with --port 0 the port chosen), and on SIGTERM/SIGINT drains: new requests
// get 503, accepted ones finish, then exit 0. Signals as `xtrain dashboard`: a byte on a pipe.
#include <CLI/CLI.hpp>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/cli/stop_signal.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/compress/artifact.h"
#include "xtrain/compress/graph/executor.h"
#include "xtrain/compress/graph/trace.h"
#include "xtrain/compress/quant/quant_plan.h"
#include "xtrain/config/config.h"
#include "xtrain/models/registry.h"
#include "xtrain/run/run_tokenizer.h"
#include "xtrain/run/train.h"
#include "xtrain/serve/server.h"

namespace xtrain::cli {
namespace {
namespace fs = std::filesystem;

struct ServeArgs {
  std::string run_dir, tag, from;
  bool int8 = false, no_batching = false;
  serve::ServeOptions options;
};

// The compressed model of `xtrain compress` (model.pt, config.json, quant.json) and its int8 plan.
struct Compressed {
  models::Model model;
  std::shared_ptr<compress::Graph> graph;
  std::shared_ptr<compress::QuantPlan> plan;
};

Compressed load_compressed(const std::string& dir) {
  const auto quant = fs::path(dir) / "quant.json";
  XTRAIN_USAGE_CHECK(fs::exists(quant), "serve: --int8 needs ", quant.string(),
                     " (run `xtrain compress --run <run> --config <compress.json>` with quantization enabled first)");
  config::LoadOptions lo;
  lo.quiet = true;
  const auto cfg = config::load((fs::path(dir) / "config.json").string(), lo).config;
  torch::manual_seed(cfg.trainer.seed);
  Compressed c;
  c.model = models::build_model(cfg.model);
  compress::load_state(*c.model.module, (fs::path(dir) / "model.pt").string());
  c.model.module->eval();
  compress::TraceHints hints;
  hints.sample_shape = models::input_sample_shape(cfg.model);
  hints.dropout = cfg.model.dropout;
  c.graph = std::make_shared<compress::Graph>(compress::trace(*c.model.module, hints));
  const auto text = read_file(quant.string());
  c.plan = std::make_shared<compress::QuantPlan>(*c.graph, compress::quant_options_from_json(text));
  compress::restore_quant_plan(*c.graph, *c.plan, text);
  return c;
}

serve::ServedModel load_served(const ServeArgs& a) {
  auto run = load_trained_run(a.run_dir, a.tag);
  serve::ServedModel m;
  m.name = fs::path(a.run_dir).lexically_normal().filename().string();
  if (m.name.empty()) m.name = fs::path(a.run_dir).lexically_normal().parent_path().filename().string();
  m.task = run.model.task;
  models::Model model = run.model;
  model.module->eval();
  models::DecoderWeights weights;
  Compressed c;
  if (a.int8) {
    c = load_compressed(!a.from.empty() ? a.from : (fs::path(a.run_dir) / "compressed").string());
    model = c.model;
    m.precision = "int8";
    if (m.task == "lm") weights = serve::int8_decoder_weights(*c.graph, *c.plan);
    model.forward = [graph = c.graph, plan = c.plan](const at::Tensor& x) { return compress::run_graph(*graph, x, plan.get()); };
  }
  const bool text_data = data_tokenizer(run.config.data) != nullptr;
  if (m.task == "lm" || text_data) m.tokenizer = load_run_tokenizer(a.run_dir, run.config, model.options.vocab);
  if (m.task == "lm") {
    const auto& entry = models::find_model(model.options.type);
    XTRAIN_USAGE_CHECK(entry.incremental_decoder, "serve: xtrain.model.type \"", model.options.type,
                       "\" has no incremental decoder (ModelEntry::incremental_decoder is not set)");
    m.decoder = entry.incremental_decoder(model, weights);
  } else {
    m.classify = model.forward;
    m.max_tokens_in = model.options.seq_len;
    if (!text_data) m.sample_shape = models::input_sample_shape(model.options);
  }
  return m;
}

int run_serve(const ServeArgs& a) {
  serve::ServeOptions o = a.options;
  o.batching = !a.no_batching;
  serve::ServedModel model = load_served(a);
  const std::string summary = model.name + ", " + model.task + ", " + model.precision;
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-stream is handled where the write fails
  install_stop_signal_handlers();
  serve::Server server(std::move(model), o);
  const int port = server.bind();
  const std::string host = o.host == "0.0.0.0" || o.host == "::" ? "127.0.0.1" : o.host;
  std::cout << "serve: http://" << host << ":" << port << "/ (" << summary << "; batching "
            << (o.batching ? "on, up to " + std::to_string(o.max_batch) : std::string("off")) << "; Ctrl-C stops)"
            << std::endl;
  std::thread waiter([&server] {
    wait_for_stop_signal();
    std::cerr << "serve: stopping: finishing the requests in flight" << std::endl;
    server.shutdown();
  });
  server.run();
  raise_stop_signal();  // run() may have ended on its own: release the waiter
  waiter.join();
  std::cerr << "serve: stopped" << std::endl;
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve a trained run over HTTP (OpenAI-style /v1/completions, /v1/classify)");
  auto a = std::make_shared<ServeArgs>();
  auto& o = a->options;
  cmd->add_option("--run,-r", a->run_dir, "run directory")->required();
  cmd->add_option("--tag", a->tag, "checkpoint tag (default: latest)");
  cmd->add_flag("--int8", a->int8, "serve the int8 model of `xtrain compress` (<run>/compressed, or --from)");
  cmd->add_option("--from", a->from, "the compressed folder for --int8 (default: <run>/compressed)");
  cmd->add_option("--host", o.host, "address to listen on (not loopback: needs --token)")->capture_default_str();
  cmd->add_option("--port,-p", o.port, "port (0: any free port, printed)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--token", o.token, "secret every request must carry ('Authorization: Bearer T')")
      ->envname("XTRAIN_SERVE_TOKEN");
  cmd->add_option("--max-batch", o.max_batch, "sequences decoded together per step")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-queue", o.max_queue, "requests waiting beyond the batch; more get 503")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--token-budget", o.token_budget, "sum of prompt + max_tokens over the sequences decoded at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-batching", a->no_batching, "decode one request at a time (the baseline)");
  return {cmd, [a] { return run_serve(*a); }};
}

}  // namespace xtrain::cli
