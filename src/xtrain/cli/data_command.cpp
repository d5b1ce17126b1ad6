// `xtrain data prepare`: tokenize a corpus into a folder of llm.c token shards that
// `xtrain train --set xtrain.data.type=tokens --set xtrain.data.path=DIR` reads (data/token_prepare.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "xtrain/cli/subcommands.h"
#include "xtrain/data/token_prepare.h"
#include "xtrain/monitor/progress.h"

namespace xtrain::cli {
namespace {

struct PrepareArgs {
  data::PrepareOptions o;
  std::string model_file, gpt2_dir;
};

int run_prepare(PrepareArgs& a) {
  a.o.tokenizer.model_file = a.model_file;
  a.o.tokenizer.gpt2_dir = a.gpt2_dir;
  std::unique_ptr<monitor::Progress> bar;
  const auto r = data::prepare_tokens(a.o, [&bar](const data::PrepareProgress& p) {
    if (p.chunks_done == 0) {  // tokenizing starts: the clock of the rate starts here
      bar = std::make_unique<monitor::Progress>("tok", p.chunks_total, std::max<int64_t>(1, p.chunks_total / 20), true);
      return;
    }
    char text[64];
    std::snprintf(text, sizeof text, "%.1f/%.1f MiB", double(p.bytes_done) / (1 << 20), double(p.bytes_total) / (1 << 20));
    bar->update(p.chunks_done, double(p.chunk_tokens), {{"text", text}, {"tokens", monitor::format_rate(double(p.tokens))}});
  });
  if (bar) bar->finish();
  std::cout << "wrote " << a.o.output << ": " << r.train_tokens << " train + " << r.val_tokens << " val tokens from "
            << r.documents << " documents in " << r.files.size() << " shards; tokenizer " << r.tokenizer
            << " (vocab " << r.vocab_size << ")\ntrain on it: xtrain train --set xtrain.data.type=tokens --set "
            << "xtrain.data.path=" << a.o.output << std::endl;
  return 0;
}

}  // namespace

Command add_data(CLI::App& app) {
  auto* cmd = app.add_subcommand("data", "Data preparation");
  cmd->require_subcommand(1);
  auto* prep = cmd->add_subcommand("prepare", "Tokenize text files, globs or JSONL into llm.c token shards "
                                              "(train_*.bin, val_*.bin), manifest.json and the tokenizer");
  auto a = std::make_shared<PrepareArgs>();
  prep->add_option("--input,-i", a->o.inputs, "text files, *.jsonl files or glob patterns (repeatable)")->required();
  prep->add_option("--text-field", a->o.text_field, "JSONL: the field holding each document's text")
      ->capture_default_str();
  prep->add_option("--tokenizer", a->o.tokenizer.type, "byte, bpe, unigram or gpt2")->capture_default_str();
  prep->add_option("--vocab-size", a->o.tokenizer.vocab_size, "bpe / unigram: the vocabulary to train");
  prep->add_option("--tokenizer-model", a->model_file, "bpe / unigram: a SentencePiece .model to use instead of training");
  prep->add_option("--gpt2-dir", a->gpt2_dir, "gpt2: the folder with encoder.json + vocab.bpe (default: the fetched copy)");
  prep->add_option("--output,-o", a->o.output, "the folder to write")->required();
  prep->add_option("--val-fraction", a->o.val_fraction, "share of each chunk's tokens held out for validation")
      ->capture_default_str();
  prep->add_option("--shard-tokens", a->o.shard_tokens, "tokens per shard file")->capture_default_str();
  prep->add_option("--threads", a->o.threads, "tokenizing threads (0: every core)")->capture_default_str();
  return {cmd, [a] { return run_prepare(*a); }};
}

}  // namespace xtrain::cli
