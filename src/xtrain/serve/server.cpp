// Server: cpp-httplib glue around the handlers (handlers.h), the access rules of the dashboard and
// the metrics. Shutdown drains: a flag makes new requests answer 503, the server waits until every
// request it accepted has been answered (streams included), and only then closes the socket.
#include "xtrain/serve/server.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/monitor/dashboard_auth.h"
#include "xtrain/monitor/httplib_includes.h"
#include "xtrain/serve/handlers.h"
#include "xtrain/serve/request.h"

namespace xtrain::serve {

struct Server::Impl {
  ServedModel model;
  ServeOptions options;
  Metrics metrics;
  std::unique_ptr<Scheduler> scheduler;
  httplib::Server http;
  std::mutex classify_mu;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> draining{false};
  std::atomic<int64_t> in_flight{0};
  HandlerContext context() {
    return {model, scheduler.get(), classify_mu, next_id, [](const std::string& m) { log::warn(m); }};
  }
};

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void json_reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

// The dashboard's rules: a token in `Authorization: Bearer T`, else a loopback Host header.
bool allowed(const ServeOptions& o, const httplib::Request& req, httplib::Response& res) {
  if (!o.token.empty()) {
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && monitor::same_secret(auth.substr(prefix.size()), o.token)) return true;
    res.set_header("WWW-Authenticate", "Bearer");
    json_reply(res, 401, error_json("missing or wrong token: send 'Authorization: Bearer <token>'", "",
                                    "authentication_error"));
    return false;
  }
  if (monitor::is_loopback_host(monitor::host_without_port(req.get_header_value("Host")))) return true;
  json_reply(res, 403, error_json("this server listens on loopback without a token: the Host header must name a "
                                  "loopback address (127.0.0.1, localhost)", "", "permission_error"));
  return false;
}

// Adapts a Reply; `done` runs once the reply is complete (at once, or when its stream ends).
void send(const Reply& r, httplib::Response& res, std::function<void(int status)> done) {
  if (r.retry_after > 0) res.set_header("Retry-After", std::to_string(r.retry_after));
  if (!r.stream) {
    json_reply(res, r.status, r.body);
    done(r.status);
    return;
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  auto stream = r.stream;
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t, httplib::DataSink& sink) {
        const auto state = stream([&sink](const std::string& s) { return sink.write(s.data(), s.size()); });
        if (state == Reply::kDone) sink.done();
        return state != Reply::kFailed;
      },
      [done](bool) { done(200); });
}

}  // namespace

Server::Server(ServedModel model, ServeOptions options) : impl_(std::make_unique<Impl>()) {
  XTRAIN_USAGE_CHECK(options.max_batch > 0, "serve: --max-batch must be > 0, got ", options.max_batch);
  XTRAIN_USAGE_CHECK(options.max_queue >= 0, "serve: --max-queue must be >= 0, got ", options.max_queue);
  XTRAIN_USAGE_CHECK(options.token_budget > 0, "serve: --token-budget must be > 0, got ", options.token_budget);
  impl_->model = std::move(model);
  impl_->options = options;
  if (impl_->model.task == "lm") {
    XTRAIN_USAGE_CHECK(impl_->model.decoder && impl_->model.tokenizer, "serve: a language model needs its decoder and tokenizer");
    impl_->scheduler = std::make_unique<Scheduler>(impl_->model.decoder, options, impl_->metrics);
  }
  // One HTTP thread per request that can be in flight (queued + decoding), plus a few for probes.
  const size_t threads = static_cast<size_t>(std::min<int64_t>(512, options.max_queue + options.max_batch + 8));
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  auto* impl = impl_.get();
  impl->http.set_pre_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
    return allowed(impl->options, req, res) ? httplib::Server::HandlerResponse::Unhandled
                                            : httplib::Server::HandlerResponse::Handled;
  });
  impl->http.Get("/health", [impl](const httplib::Request&, httplib::Response& res) {
    nlohmann::json j = {{"status", impl->draining ? "draining" : "ok"}, {"model", impl->model.name},
                        {"task", impl->model.task}, {"precision", impl->model.precision}};
    if (impl->model.decoder) j["context"] = impl->model.decoder->max_context();
    json_reply(res, 200, j.dump());
    impl->metrics.request("/health", 200, 0);
  });
  impl->http.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    res.set_content(impl->metrics.prometheus(), "text/plain; version=0.0.4");
  });
  auto post = [impl](const std::string& route, Reply (*handler)(const HandlerContext&, const std::string&)) {
    impl->http.Post(route, [impl, route, handler](const httplib::Request& req, httplib::Response& res) {
      const auto start = Clock::now();
      ++impl->in_flight;
      auto done = [impl, route, start](int status) {
        impl->metrics.request(route, status, since(start));
        --impl->in_flight;
      };
      if (impl->draining) {
        Reply busy{503, error_json("the server is shutting down", "", "server_busy"), 5, nullptr};
        return send(busy, res, done);
      }
      send(handler(impl->context(), req.body), res, done);
    });
  };
  post("/v1/completions", &complete);
  post("/v1/classify", &classify);
  impl->http.set_error_handler([impl](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    json_reply(res, res.status, error_json("no route " + req.method + " " + req.path + " (routes: POST /v1/completions, "
                                           "POST /v1/classify, GET /health, GET /metrics)", "", "invalid_request_error"));
    impl->metrics.request("other", res.status, 0);
  });
}

Server::~Server() {
  shutdown();
  if (impl_->scheduler) impl_->scheduler->drain();
}

int Server::bind() {
  const auto& o = impl_->options;
  XTRAIN_USAGE_CHECK(!o.token.empty() || monitor::is_loopback_host(o.host), "serve: --host ", o.host,
                     " is not loopback: set --token (anyone who can reach the port could use the model otherwise)");
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  XTRAIN_USAGE_CHECK(port > 0, "serve: cannot listen on ", o.host, ":", o.port, " (in use? try --port 0)");
  return port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::shutdown() {
  impl_->draining = true;
  while (impl_->in_flight > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->http.stop();
}

}  // namespace xtrain::serve
