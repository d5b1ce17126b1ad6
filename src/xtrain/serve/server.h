// `xtrain serve`'s HTTP server (cpp-httplib, as the dashboard):
//   POST /v1/completions  OpenAI's completions subset (prompt, max_tokens, temperature, top_k,
//                         top_p, stop, seed, stream: server-sent events `data: {...}` then
//                         `data: [DONE]`), decoded by the continuous-batching Scheduler
//   POST /v1/classify     a classifier run: {"text": "..."} (text runs) or {"input": nested list}
//                         (other runs: one sample, its shape or flat) -> label and probabilities
//   GET  /health          {"status", "model", "task", "precision", "context"}
//   GET  /metrics         Prometheus text (metrics.h)
// Errors are JSON naming the field (request.h). Access as the dashboard (monitor/dashboard_auth.h):
// with a token every route needs `Authorization: Bearer T`; a non-loopback host without a token is
// refused at bind(); on loopback without a token the Host header must be loopback (DNS rebinding).
#pragma once
#include <memory>
#include <string>

#include "xtrain/serve/options.h"
#include "xtrain/serve/served_model.h"

namespace xtrain::serve {

class Server {
 public:
  Server(ServedModel model, ServeOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket; returns the port. UsageError for an unsafe or invalid address.
  int bind();
  // Serves until shutdown(); bind() first.
  void run();
  // Stops accepting (new requests get 503 while the socket closes), lets every accepted request
  // finish, then ends run(). Safe from any thread.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xtrain::serve
