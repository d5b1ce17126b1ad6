// The scheduler loop: admit (under the lock), prefill the newcomers one by one, then one batched
// step over every active sequence, sample each row with the sequence's own TokenSampler.
#include "xtrain/serve/scheduler.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "xtrain/models/generate.h"

namespace xtrain::serve {

struct Scheduler::Active {
  std::shared_ptr<Sequence> seq;
  std::unique_ptr<models::DecodeState> state;
  std::unique_ptr<models::TokenSampler> sampler;
  int64_t generated = 0, last = 0, cost = 0;
  std::string finish;  // "" while running
};

Scheduler::Scheduler(std::shared_ptr<models::IncrementalDecoder> decoder, const ServeOptions& options,
                     Metrics& metrics)
    : decoder_(std::move(decoder)), options_(options), metrics_(metrics) {
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { drain(); }

bool Scheduler::submit(std::shared_ptr<Sequence> seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Room: the free decoding slots (joined at the next step) plus max_queue waiting.
    const int64_t slots = options_.batching ? options_.max_batch : 1;
    const int64_t room = options_.max_queue + std::max<int64_t>(0, slots - active_count_);
    if (draining_ || static_cast<int64_t>(queue_.size()) >= room) return false;
    queue_.push_back(std::move(seq));
    metrics_.set_queue(static_cast<int64_t>(queue_.size()), active_count_);
  }
  cv_.notify_one();
  return true;
}

void Scheduler::drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

int64_t Scheduler::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

// Moves what fits from the queue to `out`; false when the loop should end. Called under mu_.
bool Scheduler::admit(std::vector<std::shared_ptr<Sequence>>& out) {
  const int64_t slots = options_.batching ? options_.max_batch : 1;
  while (!queue_.empty() && active_count_ < slots) {
    const auto& s = queue_.front();
    const int64_t cost = static_cast<int64_t>(s->prompt.size()) + s->max_tokens;
    if (active_count_ > 0 && active_budget_ + cost > options_.token_budget) break;
    active_budget_ += cost;
    ++active_count_;
    out.push_back(queue_.front());
    queue_.pop_front();
  }
  metrics_.set_queue(static_cast<int64_t>(queue_.size()), active_count_);
  return !(draining_ && queue_.empty() && active_count_ == 0);
}

void Scheduler::emit(Active& a, int64_t token) {
  const auto& s = *a.seq;
  if (s.eos && token == *s.eos) {
    a.finish = "stop";
    return;
  }
  ++a.generated;
  a.last = token;
  if (!s.on_token(token)) {
    a.finish = "stop";
  } else if (a.generated >= s.max_tokens) {
    a.finish = "length";
  }
}

void Scheduler::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Sequence>> joining;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return draining_ || !queue_.empty() || active_count_ > 0; });
      if (!admit(joining)) return;
    }
    for (auto& seq : joining) {
      auto a = std::make_unique<Active>();
      a->seq = seq;
      a->cost = static_cast<int64_t>(seq->prompt.size()) + seq->max_tokens;
      try {
        a->sampler = std::make_unique<models::TokenSampler>(decoder_->vocab(), seq->temperature, seq->top_k,
                                                            seq->top_p, seq->seed);
        if (seq->max_tokens <= 0) {
          a->finish = "length";
        } else {
          a->state = decoder_->start();
          emit(*a, a->sampler->next(decoder_->prefill(*a->state, seq->prompt)));
          metrics_.step(0, a->generated);  // a prefill: tokens, not a decoding step
        }
      } catch (const std::exception& e) {
        a->finish = std::string("error: ") + e.what();
      }
      active_.push_back(std::move(a));
    }
    std::vector<models::DecodeState*> states;
    std::vector<int64_t> tokens;
    std::vector<Active*> running;
    for (auto& a : active_) {
      if (!a->finish.empty()) continue;
      running.push_back(a.get()), states.push_back(a->state.get()), tokens.push_back(a->last);
    }
    if (!running.empty()) {
      try {
        const auto logits = decoder_->step(states, tokens);
        for (size_t i = 0; i < running.size(); ++i) emit(*running[i], running[i]->sampler->next(logits[i]));
        metrics_.step(static_cast<int64_t>(running.size()), static_cast<int64_t>(running.size()));
      } catch (const std::exception& e) {
        for (auto* a : running) a->finish = std::string("error: ") + e.what();
      }
    }
    // Finished sequences leave between steps.
    int64_t freed = 0, left = 0;
    for (auto& a : active_) {
      if (a->finish.empty()) continue;
      a->seq->on_done(a->finish);
      freed += a->cost, ++left;
    }
    active_.erase(std::remove_if(active_.begin(), active_.end(), [](const auto& a) { return !a->finish.empty(); }),
                  active_.end());
    std::lock_guard<std::mutex> lock(mu_);
    active_budget_ -= freed;
    active_count_ -= left;
    metrics_.set_queue(static_cast<int64_t>(queue_.size()), active_count_);
  }
}

}  // namespace xtrain::serve
