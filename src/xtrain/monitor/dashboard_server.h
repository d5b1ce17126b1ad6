// `xtrain dashboard`: a small web server (cpp-httplib) over a folder of run directories.
//   /                          the page (web/index.html, compiled in)
//   /static/<file>             bundled files only: looked up in a table, never joined to a disk
//                              path; "..", "\\", absolute or encoded traversal -> 400
//   /api/runs                  [{"name", "last_step", "last_update", "metrics_bytes", "has_config"}]
//   /api/runs/<name>/metrics   {"records": [metrics.jsonl lines], "offset": bytes read}
//   /api/runs/<name>/config    the run's config.json
//   /api/runs/<name>/breakdown stage-time table from its time/*_ms metrics (run_reader.h)
//   /api/events                server-sent events: "reset" on connect, "runs" when the set of runs
//                              changes, "metrics" {"run", "records"} with every complete line from
//                              the start of each file and then as lines are appended (files polled)
// With a token, every request needs `?token=T` or `Authorization: Bearer T` (401 otherwise). Bound
// to loopback without a token, requests must name a loopback Host (blocks DNS rebinding).
#pragma once
#include <memory>
#include <string>

namespace xtrain::monitor {

struct DashboardOptions {
  std::string logdir = "runs";
  std::string host = "127.0.0.1";
  int port = 6006;  // 0: any free port
  std::string token;  // "" = none
  double poll_seconds = 0.5;
};

bool is_loopback_host(const std::string& host);
// The address to open: http://<host or 127.0.0.1 for 0.0.0.0/::>:<port>/[?token=<url-encoded>]
std::string dashboard_url(const DashboardOptions& options, int port);

class DashboardServer {
 public:
  explicit DashboardServer(DashboardOptions options);
  ~DashboardServer();  // stop()
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  // Binds the socket; returns the port. UsageError when the address cannot be bound.
  int bind();
  // Serves until stop(); bind() first.
  void run();
  // bind() + run() on a background thread (tests); returns the port.
  int start();
  // Ends run() and every open event stream; safe from any thread.
  void stop();
  int port() const { return port_; }

 private:
  struct Impl;
  void add_routes();
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace xtrain::monitor
