// Design choice: the server holds no state about runs — every request and every event stream
// reads the run folders again (a list of folders and a few file sizes per poll), so runs that
// start, grow or disappear while the dashboard is up need no bookkeeping. The token itself is
// never written anywhere: not in a log line, an error, a page, a URL or a cookie.
#include "xtrain/monitor/dashboard_server.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/monitor/dashboard_auth.h"
#include "xtrain/monitor/dashboard_events.h"
#include "xtrain/monitor/dashboard_files.h"
#include "xtrain/monitor/httplib_includes.h"
#include "xtrain/monitor/run_reader.h"
#include "xtrain/monitor/web_assets.h"

namespace xtrain::monitor {
namespace fs = std::filesystem;

namespace {

// What the handlers share (the server and its thread are in Impl).
struct ServerState {
  DashboardOptions o;
  EventStreams streams;
  const std::string session = random_session();  // the cookie's value: not the token
  std::atomic<int> port{0};
  std::atomic<int> open_streams{0};
  explicit ServerState(DashboardOptions options) : o(std::move(options)), streams(o.logdir, o.poll_seconds) {}
};

}  // namespace

struct DashboardServer::Impl {
  ServerState state;
  httplib::Server server;
  std::thread thread;
  explicit Impl(DashboardOptions options) : state(std::move(options)) {}
};

std::string dashboard_url(const DashboardOptions& o, int port) {
  std::string host = o.host == "0.0.0.0" || o.host == "::" || o.host.empty() ? "127.0.0.1" : o.host;
  if (host.find(':') != std::string::npos && host[0] != '[') host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port) + "/";
}

namespace {

using Handled = httplib::Server::HandlerResponse;

void text(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body + "\n", "text/plain; charset=utf-8");
}

Handled deny(httplib::Response& res) {
  res.set_header("WWW-Authenticate", "Bearer");
  res.set_header("Cache-Control", "no-store");
  text(res, 401,
       "401 unauthorized: this dashboard needs its token: open its address with ?token=<the --token value> once "
       "(the browser then keeps a session cookie), or send 'Authorization: Bearer <token>'");
  return Handled::Handled;
}

// Runs before routing, so every route (page, files, API, events, and unknown paths) is covered.
Handled authorize(const ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const DashboardOptions& o = s.o;
  if (o.token.empty()) {
    const std::string host = host_without_port(req.get_header_value("Host"));
    if (is_loopback_host(o.host) && !host.empty() && !is_loopback_host(host)) {
      text(res, 403, "403 forbidden: a loopback dashboard answers only to localhost / 127.0.0.1");
      return Handled::Handled;
    }
    return Handled::Unhandled;
  }
  const std::string cookie = session_cookie_name(s.port);
  if (req.has_param("token")) {  // from the URL: trade it for the cookie, then drop it from the URL
    if (!same_secret(req.get_param_value("token"), o.token)) return deny(res);
    res.set_header("Set-Cookie", session_set_cookie(cookie, s.session));
    res.set_header("Cache-Control", "no-store");
    res.set_header("Content-Security-Policy", "default-src 'none'");
    res.status = 200;  // a page that moves on by itself (dashboard_auth.h says why not a 30x)
    res.set_content(handoff_page(location_without_token(req.path, req.params)), "text/html; charset=utf-8");
    return Handled::Handled;
  }
  const std::string auth = req.get_header_value("Authorization");
  const bool bearer = auth.rfind("Bearer ", 0) == 0 && same_secret(auth.substr(7), o.token);
  const bool session = same_secret(cookie_value(req.get_header_value("Cookie"), cookie), s.session);
  return bearer || session ? Handled::Unhandled : deny(res);
}

// A path under /static/: relative, no "..", no backslash, no NUL (httplib has decoded %xx already,
// so an encoded traversal arrives here as a plain one).
bool is_safe_asset_path(const std::string& p) {
  return !p.empty() && p[0] != '/' && p.find("..") == std::string::npos && p.find('\\') == std::string::npos &&
         p.find('\0') == std::string::npos;
}

void serve_page(httplib::Response& res) {
  const WebAsset* page = find_web_asset("index.html");
  if (page == nullptr) return text(res, 500, "500: the dashboard page was not compiled in (web/index.html)");
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'");
  res.set_header("Cache-Control", "no-store");
  res.set_content(std::string(page->bytes), "text/html; charset=utf-8");
}

void serve_asset(const httplib::Request& req, httplib::Response& res) {
  const std::string path = req.matches[1];
  if (!is_safe_asset_path(path)) return text(res, 400, "400 bad path: " + nlohmann::json(path).dump());
  const WebAsset* a = find_web_asset(path);
  if (a == nullptr) return text(res, 404, "404 not found");
  res.set_content(std::string(a->bytes), content_type_for(path));
}

void serve_run(const DashboardOptions& o, const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches[1], what = req.matches[2];
  if (!is_valid_run_name(name)) return text(res, 400, "400 bad run name");
  const fs::path dir = fs::path(o.logdir) / name;
  const std::string metrics = (dir / "metrics.jsonl").string();
  if (!fs::is_regular_file(metrics) || !resolves_inside(o.logdir, metrics)) return text(res, 404, "404 no such run");
  res.set_header("Cache-Control", "no-store");
  if (what == "config") {
    const std::string config = (dir / "config.json").string();
    std::ifstream f(config);
    if (!f || !resolves_inside(o.logdir, config)) return text(res, 404, "404 this run has no config.json");
    return res.set_content(std::string(std::istreambuf_iterator<char>(f), {}), "application/json");
  }
  const MetricsChunk c = read_metrics(dir.string(), 0);
  if (what == "breakdown") return res.set_content(breakdown_json(c.lines), "application/json");
  res.set_content("{\"records\":" + json_array(c.lines) + ",\"offset\":" + std::to_string(c.next_offset) + "}",
                  "application/json");
}

// Holds one of the max_streams places while any copy of its stream's provider lives.
struct StreamSlot {
  std::atomic<int>& open;
  explicit StreamSlot(std::atomic<int>& counter) : open(counter) {}
  ~StreamSlot() { open.fetch_sub(1); }
};

// One event stream per open page; the provider is called again as long as it returns true.
void attach_events(ServerState& s, httplib::Response& res) {
  if (s.open_streams.fetch_add(1) >= s.o.max_streams) {
    s.open_streams.fetch_sub(1);
    res.set_header("Retry-After", "10");
    return text(res, 503, c10::str("503: ", s.o.max_streams, " event streams are open already (one per open page; "
                                   "xtrain dashboard --max-streams raises the bound)"));
  }
  auto slot = std::make_shared<StreamSlot>(s.open_streams);
  auto cursor = std::make_shared<EventStreams::Cursor>();
  res.set_header("Cache-Control", "no-store");
  EventStreams& streams = s.streams;
  res.set_chunked_content_provider("text/event-stream", [&streams, cursor, slot](size_t, httplib::DataSink& sink) {
    const std::string chunk = streams.poll(*cursor);
    if (!chunk.empty() && !sink.write(chunk.data(), chunk.size())) return false;  // the page went away
    if (!streams.wait()) sink.done();
    return true;
  });
}

}  // namespace

DashboardServer::DashboardServer(DashboardOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  add_routes();
}

DashboardServer::~DashboardServer() { stop(); }

int DashboardServer::bind() {
  const auto& o = impl_->state.o;
  XTRAIN_USAGE_CHECK(is_loopback_host(o.host) || !o.token.empty(), "dashboard: --host ", o.host,
                     " is not a loopback address, so anyone who can reach this machine could read these runs: "
                     "add --token T (a secret every request must carry; e.g. --token $(openssl rand -hex 16)), "
                     "or listen on this machine only with --host 127.0.0.1");
  XTRAIN_USAGE_CHECK(o.port >= 0 && o.port <= 65535, "dashboard: --port must be in 0..65535, got ", o.port);
  XTRAIN_USAGE_CHECK(o.max_streams >= 1, "dashboard: --max-streams must be >= 1, got ", o.max_streams);
  if (o.port == 0) {
    port_ = impl_->server.bind_to_any_port(o.host);
  } else {
    port_ = impl_->server.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  XTRAIN_USAGE_CHECK(port_ > 0, "dashboard: cannot listen on ", o.host, ":", o.port,
                     " (address in use, or not an address of this machine); try --port 0 for any free port");
  impl_->state.port = port_;
  return port_;
}

void DashboardServer::run() { impl_->server.listen_after_bind(); }

int DashboardServer::start() {
  const int port = bind();
  impl_->thread = std::thread([this] { run(); });
  return port;
}

void DashboardServer::stop() {
  impl_->state.streams.stop();
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void DashboardServer::add_routes() {
  ServerState& s = impl_->state;
  auto& srv = impl_->server;
  const DashboardOptions& o = s.o;
  // Every open page holds a thread for its event stream; the rest serve the API and files.
  const int threads = o.max_streams + 16;
  srv.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  srv.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                           {"Referrer-Policy", "no-referrer"},
                           {"X-Frame-Options", "DENY"}});
  srv.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    return authorize(s, req, res);
  });
  srv.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return Handled::Unhandled;
        text(res, res.status, std::to_string(res.status) + (res.status == 404 ? " not found" : " error"));
        return Handled::Handled;
      }));
  srv.Get("/", [](const httplib::Request&, httplib::Response& res) { serve_page(res); });
  srv.Get("/index.html", [](const httplib::Request&, httplib::Response& res) { serve_page(res); });
  srv.Get(R"(/static/(.*))", serve_asset);
  srv.Get("/api/runs", [&o](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(runs_json(list_contained_runs(o.logdir)), "application/json");
  });
  srv.Get(R"(/api/runs/([^/]+)/(metrics|config|breakdown))",
          [&o](const httplib::Request& req, httplib::Response& res) { serve_run(o, req, res); });
  srv.Get("/api/events", [&s](const httplib::Request&, httplib::Response& res) { attach_events(s, res); });
}

}  // namespace xtrain::monitor
