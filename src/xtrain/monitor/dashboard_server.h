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
//                              the start of each file and then as lines are appended (files polled);
//                              at most max_streams at once (503 + Retry-After beyond)
// Run files are served only when they resolve inside the log folder (dashboard_files.h).
// Access: with a token, every route answers 401 unless the request carries `Authorization: Bearer
// T`, the session cookie, or `?token=T` (then: the cookie, and a page that moves on at once to the
// same URL without the token; dashboard_auth.h). A non-loopback host without a token is refused at bind(). Bound to loopback
// without a token, requests must name a loopback Host (blocks DNS rebinding).
#pragma once
#include <memory>
#include <string>

namespace xtrain::monitor {

struct DashboardOptions {
  std::string logdir = "runs";
  std::string host = "127.0.0.1";
  int port = 6006;  // 0: any free port
  std::string token;  // "" = none; required unless host is loopback
  double poll_seconds = 0.5;
  // Open event streams at once (one per open page; each holds a server thread while open).
  int max_streams = 16;
};

// The address to open: http://<host or 127.0.0.1 for 0.0.0.0/::>:<port>/ (never with the token).
std::string dashboard_url(const DashboardOptions& options, int port);

class DashboardServer {
 public:
  explicit DashboardServer(DashboardOptions options);
  ~DashboardServer();  // stop()
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  // Binds the socket; returns the port. UsageError when the options are unsafe (a non-loopback
  // host without a token) or invalid, or the address cannot be bound.
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
