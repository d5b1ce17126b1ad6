// serve::Scheduler with a decoder whose next token is a closed form of the sequence so far (the
// next id is (last + 1) mod V, with all the mass on it: greedy and sampled decoding agree), so the
// tokens each request gets are known exactly; and the request parser's field errors.
#include <ATen/ops/full.h>
#include <ATen/ops/stack.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

#include "xtrain/serve/request.h"
#include "xtrain/serve/scheduler.h"

namespace xtrain::serve::scheduler_test {
namespace {

constexpr int64_t kV = 10;

class CountingDecoder : public models::IncrementalDecoder {
 public:
  struct State : models::DecodeState {
    std::vector<int64_t> tokens;
    int64_t length() const override { return static_cast<int64_t>(tokens.size()); }
  };
  int64_t max_context() const override { return 64; }
  int64_t vocab() const override { return kV; }
  std::unique_ptr<models::DecodeState> start() override { return std::make_unique<State>(); }
  at::Tensor prefill(models::DecodeState& s, const std::vector<int64_t>& tokens) override {
    static_cast<State&>(s).tokens = tokens;
    return row(tokens.back());
  }
  at::Tensor step(const std::vector<models::DecodeState*>& states, const std::vector<int64_t>& tokens) override {
    std::vector<at::Tensor> rows;
    for (size_t i = 0; i < states.size(); ++i) {
      static_cast<State*>(states[i])->tokens.push_back(tokens[i]);
      rows.push_back(row(tokens[i]));
    }
    max_batch = std::max<int64_t>(max_batch, static_cast<int64_t>(states.size()));
    return at::stack(rows, 0);
  }
  std::atomic<int64_t> max_batch{0};

 private:
  static at::Tensor row(int64_t last) {
    auto r = at::full({kV}, -1e9, at::kFloat);
    r[(last + 1) % kV] = 0.0;
    return r;
  }
};

struct Result {
  std::vector<int64_t> tokens;
  std::string finish;
};

std::shared_ptr<Sequence> sequence(std::vector<int64_t> prompt, int64_t max_tokens, std::promise<Result>* done,
                                   std::optional<int64_t> eos = {}, int64_t stop_after = -1) {
  auto s = std::make_shared<Sequence>();
  auto out = std::make_shared<Result>();
  s->prompt = std::move(prompt);
  s->max_tokens = max_tokens;
  s->eos = eos;
  s->on_token = [out, stop_after](int64_t t) {
    out->tokens.push_back(t);
    return stop_after < 0 || static_cast<int64_t>(out->tokens.size()) < stop_after;
  };
  s->on_done = [out, done](const std::string& reason) {
    out->finish = reason;
    done->set_value(*out);
  };
  return s;
}

TEST(Scheduler, ConcurrentSequencesShareStepsAndEachGetsItsOwnTokens) {
  auto decoder = std::make_shared<CountingDecoder>();
  ServeOptions o;
  o.max_batch = 4;
  Metrics metrics;
  Scheduler scheduler(decoder, o, metrics);
  std::vector<std::promise<Result>> done(6);
  for (int64_t i = 0; i < 6; ++i) ASSERT_TRUE(scheduler.submit(sequence({i}, 5 + i, &done[i])));
  for (int64_t i = 0; i < 6; ++i) {
    const auto r = done[i].get_future().get();
    std::vector<int64_t> want;
    for (int64_t k = 1; k <= 5 + i; ++k) want.push_back((i + k) % kV);
    EXPECT_EQ(r.tokens, want) << "sequence " << i;
    EXPECT_EQ(r.finish, "length");
  }
  EXPECT_GT(decoder->max_batch.load(), 1);
  EXPECT_LE(decoder->max_batch.load(), 4);
}

TEST(Scheduler, EndOfTextAndTheCallbackEndASequence) {
  auto decoder = std::make_shared<CountingDecoder>();
  Metrics metrics;
  Scheduler scheduler(decoder, ServeOptions{}, metrics);
  std::promise<Result> eos, stop, zero;
  ASSERT_TRUE(scheduler.submit(sequence({2}, 50, &eos, /*eos=*/6)));
  ASSERT_TRUE(scheduler.submit(sequence({2}, 50, &stop, {}, /*stop_after=*/2)));
  ASSERT_TRUE(scheduler.submit(sequence({2}, 0, &zero)));
  const auto a = eos.get_future().get(), b = stop.get_future().get(), c = zero.get_future().get();
  EXPECT_EQ(a.tokens, (std::vector<int64_t>{3, 4, 5}));  // 6 ends it and is not emitted
  EXPECT_EQ(a.finish, "stop");
  EXPECT_EQ(b.tokens, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(b.finish, "stop");
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_EQ(c.finish, "length");
}

TEST(Scheduler, AFullQueueRefusesAndDrainFinishesEverythingAccepted) {
  auto decoder = std::make_shared<CountingDecoder>();
  ServeOptions o;
  o.max_batch = 1, o.max_queue = 1, o.batching = true;
  Metrics metrics;
  auto scheduler = std::make_unique<Scheduler>(decoder, o, metrics);
  std::vector<std::promise<Result>> done(3);
  // Room: one free slot + one waiting; the third is refused unless the first already started.
  int accepted = 0;
  for (int i = 0; i < 3; ++i) accepted += scheduler->submit(sequence({1}, 3000, &done[i])) ? 1 : 0;
  EXPECT_EQ(accepted, 2);
  std::promise<Result> late;
  scheduler->drain();
  EXPECT_FALSE(scheduler->submit(sequence({1}, 1, &late)));
  for (int i = 0; i < accepted; ++i) {
    const auto r = done[i].get_future().get();
    EXPECT_EQ(r.tokens.size(), 3000u);
    EXPECT_EQ(r.finish, "length");
  }
}

TEST(Request, FieldErrorsNameTheField) {
  auto field_of = [](const std::string& body) {
    try {
      parse_completion(body);
    } catch (const RequestError& e) {
      return e.field;
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(field_of("{"), "");
  EXPECT_EQ(field_of("[]"), "");
  EXPECT_EQ(field_of("{\"max_tokens\": 2}"), "prompt");
  EXPECT_EQ(field_of("{\"prompt\": 1}"), "prompt");
  EXPECT_EQ(field_of("{\"prompt\": \"a\", \"max_tokens\": -1}"), "max_tokens");
  EXPECT_EQ(field_of("{\"prompt\": \"a\", \"max_tokens\": 1.5}"), "max_tokens");
  EXPECT_EQ(field_of("{\"prompt\": \"a\", \"top_p\": 0}"), "top_p");
  EXPECT_EQ(field_of("{\"prompt\": \"a\", \"stop\": [\"a\", 1]}"), "stop");
  EXPECT_EQ(field_of("{\"prompt\": \"a\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}"), "stop");
  EXPECT_EQ(field_of("{\"prompt\": \"a\", \"seed\": -3}"), "seed");
  const auto r = parse_completion("{\"prompt\": [5, 6], \"stop\": \"x\", \"extra\": true, \"stream\": true}");
  EXPECT_EQ(*r.prompt_ids, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.stream);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("extra"), std::string::npos);
}

TEST(Request, CompleteUtf8PrefixNeverEndsInsideACharacter) {
  const std::string euro = "a\xE2\x82\xAC";  // 'a' + U+20AC (3 bytes)
  EXPECT_EQ(complete_utf8_prefix(euro, 4), 4u);
  EXPECT_EQ(complete_utf8_prefix(euro, 3), 1u);
  EXPECT_EQ(complete_utf8_prefix(euro, 2), 1u);
  EXPECT_EQ(complete_utf8_prefix(euro.substr(0, 3), 3), 1u);
  EXPECT_EQ(complete_utf8_prefix("ab", 2), 2u);
  EXPECT_EQ(complete_utf8_prefix("a\x80", 2), 2u);  // a stray continuation byte is complete as it is
}

}  // namespace
}  // namespace xtrain::serve::scheduler_test
