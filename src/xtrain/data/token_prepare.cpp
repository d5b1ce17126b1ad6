// prepare_tokens: plan chunks (line-aligned pieces of the mapped inputs), tokenize them on a pool
// of threads that stays at most 2 x threads chunks ahead of the writer, append them in input order.
#include "xtrain/data/token_prepare.h"

#include <glob.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/data/mapped_file.h"
#include "xtrain/data/token_prepare_parts.h"

namespace xtrain::data {
namespace fs = std::filesystem;

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const auto& pattern : inputs) {
    if (pattern.find_first_of("*?[") == std::string::npos) {
      XTRAIN_USAGE_CHECK(fs::is_regular_file(pattern), "data prepare: input file ", pattern, " not found (--input)");
      files.push_back(pattern);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    std::vector<std::string> matched;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) {
      if (fs::is_regular_file(g.gl_pathv[i])) matched.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    XTRAIN_USAGE_CHECK(!matched.empty(), "data prepare: --input pattern ", pattern, " matches no file");
    std::sort(matched.begin(), matched.end());
    files.insert(files.end(), matched.begin(), matched.end());
  }
  XTRAIN_USAGE_CHECK(!files.empty(), "data prepare: no input: give --input FILE or a glob");
  return files;
}

namespace {

// Tokenized chunks handed from the pool to the writer, in any order; the writer takes them in order.
class ChunkQueue {
 public:
  ChunkQueue(int64_t count, int64_t window) : count_(count), window_(window) {}
  // The next chunk to tokenize, or -1 when none is left (or after an error). Blocks while the
  // writer is `window` chunks behind.
  int64_t claim() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return failed_ || next_ >= count_ || next_ < written_ + window_; });
    return failed_ || next_ >= count_ ? -1 : next_++;
  }
  void put(int64_t k, TokenizedChunk chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[k] = std::move(chunk);
    cv_.notify_all();
  }
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = e;
    failed_ = true;
    cv_.notify_all();
  }
  // Chunk k (blocks until tokenized); rethrows a worker's error.
  TokenizedChunk take(int64_t k) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return failed_ || done_.count(k); });
    if (failed_) std::rethrow_exception(error_);
    TokenizedChunk c = std::move(done_[k]);
    done_.erase(k);
    written_ = k + 1;
    cv_.notify_all();
    return c;
  }
  void abort() { fail(std::make_exception_ptr(std::runtime_error("data prepare: stopped"))); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, TokenizedChunk> done_;
  int64_t count_, window_, next_ = 0, written_ = 0;
  bool failed_ = false;
  std::exception_ptr error_;
};

int thread_count(int requested, size_t chunks) {
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  return int(std::max<size_t>(1, std::min<size_t>(chunks, requested > 0 ? requested : cores)));
}

// Enough chunks to keep every thread busy, none so large that the window holds much text.
int64_t auto_chunk_bytes(const std::vector<std::string>& files, int threads) {
  int64_t total = 0;
  for (const auto& f : files) total += int64_t(fs::file_size(f));
  return std::clamp<int64_t>(total / (8 * threads), 64 << 10, 4 << 20);
}

}  // namespace

PrepareResult prepare_tokens(const PrepareOptions& o, const std::function<void(const PrepareProgress&)>& progress) {
  check_prepare_options(o);
  const std::vector<std::string> files = expand_inputs(o.inputs);
  const int threads = thread_count(o.threads, std::numeric_limits<size_t>::max());
  const Corpus corpus = plan_corpus(files, o.chunk_bytes > 0 ? o.chunk_bytes : auto_chunk_bytes(files, threads));
  fs::create_directories(o.output);
  const std::unique_ptr<Tokenizer> tokenizer = build_tokenizer(o, corpus);
  const bool u32 = tokenizer->vocab_size() > 65536;
  ShardSink train(o.output, "train", u32, o.shard_tokens), val(o.output, "val", u32, o.shard_tokens);
  const int64_t n = int64_t(corpus.chunks.size());
  ChunkQueue queue(n, 2 * threads);
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < std::min<int64_t>(threads, n); ++t) {
    pool.emplace_back([&] {
      try {
        for (int64_t k = queue.claim(); k >= 0; k = queue.claim()) {
          queue.put(k, tokenize_chunk(corpus, corpus.chunks[size_t(k)], *tokenizer, o.text_field));
        }
      } catch (...) {
        queue.fail(std::current_exception());
      }
    });
  }
  PrepareResult r;
  PrepareProgress p;
  p.bytes_total = corpus.bytes;
  p.chunks_total = n;
  if (progress) progress(p);
  try {
    for (int64_t k = 0; k < n; ++k) {
      const TokenizedChunk c = queue.take(k);
      const int64_t n_val = int64_t(double(c.tokens.size()) * o.val_fraction + 0.5);
      const int64_t n_train = int64_t(c.tokens.size()) - n_val;
      train.append(c.tokens.data(), n_train);
      val.append(c.tokens.data() + n_train, n_val);
      r.documents += c.documents;
      p.bytes_done += c.bytes;
      p.tokens += int64_t(c.tokens.size());
      p.chunk_tokens = int64_t(c.tokens.size());
      p.chunks_done = k + 1;
      if (progress) progress(p);
    }
  } catch (...) {
    queue.abort();
    for (auto& th : pool) th.join();
    throw;
  }
  for (auto& th : pool) th.join();
  return finish_prepare(o, *tokenizer, train, val, r);
}

}  // namespace xtrain::data
