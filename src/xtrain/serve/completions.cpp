// complete(): parse and check the request, tokenize, queue a Sequence whose callbacks decode the
// tokens so far, cut at a stop string and keep back bytes that may still become one (or finish a
// UTF-8 character), then answer with the whole text or stream it as OpenAI's completion chunks.
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <ctime>

#include "xtrain/data/tokenizer/tokenizer.h"
#include "xtrain/serve/handlers.h"
#include "xtrain/serve/request.h"

namespace xtrain::serve {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Reply error(int status, const std::string& message, const std::string& field, const std::string& type) {
  Reply r;
  r.status = status;
  r.body = error_json(message, field, type);
  return r;
}

// What the scheduler thread and the HTTP thread share for one request.
struct Job {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> ids;
  std::string text;   // decoded so far (cut before a stop string that matched)
  size_t ready = 0;   // bytes of text that can be sent
  size_t sent = 0;    // bytes already streamed
  bool done = false, cancelled = false;
  std::string finish;
};

struct Envelope {
  std::string id, model;
  int64_t created;
  json chunk(const std::string& text, const json& finish) const {
    return {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
            {"choices", json::array({{{"text", text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
  }
};

std::shared_ptr<Sequence> make_sequence(const CompletionRequest& r, std::vector<int64_t> prompt,
                                        const data::Tokenizer& tok, std::shared_ptr<Job> job) {
  auto s = std::make_shared<Sequence>();
  s->prompt = std::move(prompt);
  s->max_tokens = r.max_tokens;
  s->temperature = r.temperature == 0 ? 1.0 : r.temperature;  // temperature 0: greedy
  s->top_k = r.temperature == 0 ? 1 : r.top_k;
  s->top_p = r.top_p;
  s->seed = r.seed;
  s->eos = tok.end_of_text();
  size_t hold = 0;
  for (const auto& st : r.stop) hold = std::max(hold, st.size() - 1);
  s->on_token = [job, &tok, stops = r.stop, hold](int64_t token) {
    std::lock_guard<std::mutex> lock(job->mu);
    job->ids.push_back(static_cast<int32_t>(token));
    job->text = tok.decode(job->ids);
    size_t cut = std::string::npos;
    for (const auto& st : stops) cut = std::min(cut, job->text.find(st));
    if (cut != std::string::npos) {
      job->text.resize(cut);
      job->ready = cut;
    } else {
      job->ready = std::max(job->ready, complete_utf8_prefix(job->text, job->text.size() - std::min(hold, job->text.size())));
    }
    job->cv.notify_all();
    return cut == std::string::npos && !job->cancelled;
  };
  s->on_done = [job](const std::string& reason) {
    std::lock_guard<std::mutex> lock(job->mu);
    job->finish = reason;
    job->ready = job->text.size();
    job->done = true;
    job->cv.notify_all();
  };
  return s;
}

// The prompt as ids: given ids checked against the vocabulary, text encoded (empty: the end-of-text
// id, else a newline, as `xtrain generate`); 400 when it does not fit the context.
std::vector<int64_t> prompt_ids(const CompletionRequest& r, const ServedModel& m) {
  std::vector<int64_t> ids;
  if (r.prompt_ids) {
    ids = *r.prompt_ids;
    for (int64_t t : ids) {
      if (t >= m.decoder->vocab()) {
        throw RequestError("prompt", "prompt token " + std::to_string(t) + " is outside the vocabulary [0, " +
                                         std::to_string(m.decoder->vocab()) + ")");
      }
    }
  } else {
    for (int32_t t : m.tokenizer->encode(r.prompt)) ids.push_back(t);
    if (ids.empty()) {
      const auto eot = m.tokenizer->end_of_text();
      for (int32_t t : eot ? std::vector<int32_t>{*eot} : m.tokenizer->encode("\n")) ids.push_back(t);
    }
  }
  const int64_t n = static_cast<int64_t>(ids.size()), T = m.decoder->max_context();
  if (n > T) {
    throw RequestError("prompt", "prompt has " + std::to_string(n) + " tokens, more than the model's context of " +
                                     std::to_string(T) + " (xtrain.model.seq_len): shorten it");
  }
  return ids;
}

json final_body(const Envelope& env, Job& job, const CompletionRequest& r, int64_t prompt_tokens) {
  json out = env.chunk(job.text, job.finish);
  out["choices"][0]["token_ids"] = job.ids;  // an xtrain extension: the generated ids
  const int64_t n = static_cast<int64_t>(job.ids.size());
  out["usage"] = {{"prompt_tokens", prompt_tokens}, {"completion_tokens", n}, {"total_tokens", prompt_tokens + n}};
  if (!r.warnings.empty()) out["warnings"] = r.warnings;
  return out;
}

Reply::StreamState stream_step(Job& job, const Envelope& env, const std::function<bool(const std::string&)>& write) {
  std::unique_lock<std::mutex> lock(job.mu);
  job.cv.wait(lock, [&] { return job.sent < job.ready || job.done; });
  if (job.sent < job.ready) {
    const std::string delta = job.text.substr(job.sent, job.ready - job.sent);
    job.sent = job.ready;
    lock.unlock();
    if (write("data: " + dump(env.chunk(delta, nullptr)) + "\n\n")) return Reply::kMore;
    std::lock_guard<std::mutex> again(job.mu);
    job.cancelled = true;  // the scheduler drops the sequence at its next token
    return Reply::kFailed;
  }
  const std::string finish = job.finish;
  lock.unlock();
  std::string last = finish.rfind("error: ", 0) == 0
                         ? "data: " + error_json(finish.substr(7), "", "server_error") + "\n\n"
                         : "data: " + dump(env.chunk("", finish)) + "\n\n";
  return write(last + "data: [DONE]\n\n") ? Reply::kDone : Reply::kFailed;
}

}  // namespace

Reply complete(const HandlerContext& ctx, const std::string& body) {
  if (ctx.model.task != "lm" || !ctx.scheduler) {
    return error(400, "this server runs a classifier (task " + ctx.model.task + "): POST /v1/classify", "",
                 "invalid_request_error");
  }
  CompletionRequest r;
  std::vector<int64_t> ids;
  try {
    r = parse_completion(body);
    ids = prompt_ids(r, ctx.model);
  } catch (const RequestError& e) {
    return error(400, e.what(), e.field, "invalid_request_error");
  }
  for (const auto& w : r.warnings) ctx.warn("serve: /v1/completions: " + w);
  auto job = std::make_shared<Job>();
  const int64_t prompt_tokens = static_cast<int64_t>(ids.size());
  if (!ctx.scheduler->submit(make_sequence(r, std::move(ids), *ctx.model.tokenizer, job))) {
    Reply busy = error(503, "the server is busy (the request queue is full, or it is shutting down): retry later",
                       "", "server_busy");
    busy.retry_after = 1;
    return busy;
  }
  const Envelope env{"cmpl-" + std::to_string(ctx.next_id++), ctx.model.name, static_cast<int64_t>(std::time(nullptr))};
  Reply reply;
  if (r.stream) {
    reply.stream = [job, env](const std::function<bool(const std::string&)>& write) {
      return stream_step(*job, env, write);
    };
    return reply;
  }
  std::unique_lock<std::mutex> lock(job->mu);
  job->cv.wait(lock, [&] { return job->done; });
  if (job->finish.rfind("error: ", 0) == 0) return error(500, job->finish.substr(7), "", "server_error");
  reply.body = dump(final_body(env, *job, r, prompt_tokens));
  return reply;
}

}  // namespace xtrain::serve
