// Design choice: the server holds no state about runs — every request and every event stream
// reads the run folders again (a list of folders and a few file sizes per poll), so runs that
// start, grow or disappear while the dashboard is up need no bookkeeping.
#include "xtrain/monitor/dashboard_server.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/monitor/dashboard_events.h"
#include "xtrain/monitor/httplib_includes.h"
#include "xtrain/monitor/run_reader.h"
#include "xtrain/monitor/web_assets.h"

namespace xtrain::monitor {
namespace fs = std::filesystem;

struct DashboardServer::Impl {
  DashboardOptions o;
  httplib::Server server;
  std::thread thread;
  EventStreams streams;
  explicit Impl(DashboardOptions options) : o(std::move(options)), streams(o.logdir, o.poll_seconds) {}
};

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

namespace {

bool same_secret(const std::string& a, const std::string& b) {  // no early exit: constant time
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string host_without_port(const std::string& host) {
  if (!host.empty() && host[0] == '[') return host.substr(0, host.find(']') + 1);
  return host.substr(0, host.find(':'));
}

std::string url_encode(const std::string& s) {  // RFC 3986 unreserved characters stay
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

std::string dashboard_url(const DashboardOptions& o, int port) {
  std::string host = o.host == "0.0.0.0" || o.host == "::" || o.host.empty() ? "127.0.0.1" : o.host;
  if (host.find(':') != std::string::npos && host[0] != '[') host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port) + "/" + (o.token.empty() ? "" : "?token=" + url_encode(o.token));
}

namespace {

void text(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body + "\n", "text/plain; charset=utf-8");
}

httplib::Server::HandlerResponse authorize(const DashboardOptions& o, const httplib::Request& req,
                                           httplib::Response& res) {
  if (!o.token.empty()) {
    const bool ok = same_secret(req.get_param_value("token"), o.token) ||
                    same_secret(req.get_header_value("Authorization"), "Bearer " + o.token);
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    text(res, 401, "401 unauthorized: this dashboard needs its token (open the address xtrain dashboard printed)");
    return httplib::Server::HandlerResponse::Handled;
  }
  const std::string host = host_without_port(req.get_header_value("Host"));
  if (is_loopback_host(o.host) && !host.empty() && !is_loopback_host(host)) {
    text(res, 403, "403 forbidden: a loopback dashboard answers only to localhost / 127.0.0.1");
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

// A path under /static/: relative, no "..", no backslash, no NUL (httplib has decoded %xx already,
// so an encoded traversal arrives here as a plain one).
bool is_safe_asset_path(const std::string& p) {
  return !p.empty() && p[0] != '/' && p.find("..") == std::string::npos && p.find('\\') == std::string::npos &&
         p.find('\0') == std::string::npos;
}

void serve_page(const DashboardOptions& o, httplib::Response& res) {
  const WebAsset* page = find_web_asset("index.html");
  if (page == nullptr) return text(res, 500, "500: the dashboard page was not compiled in (web/index.html)");
  std::string html(page->bytes);
  const std::string query = o.token.empty() ? "" : "?token=" + url_encode(o.token);
  for (size_t at; (at = html.find("{{TOKEN_QUERY}}")) != std::string::npos;) html.replace(at, 15, query);
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'");
  res.set_header("Cache-Control", "no-store");
  res.set_content(html, "text/html; charset=utf-8");
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
  if (!fs::is_regular_file(dir / "metrics.jsonl")) return text(res, 404, "404 no such run");
  res.set_header("Cache-Control", "no-store");
  if (what == "config") {
    std::ifstream f(dir / "config.json");
    if (!f) return text(res, 404, "404 this run has no config.json");
    return res.set_content(std::string(std::istreambuf_iterator<char>(f), {}), "application/json");
  }
  const MetricsChunk c = read_metrics(dir.string(), 0);
  if (what == "breakdown") return res.set_content(breakdown_json(c.lines), "application/json");
  res.set_content("{\"records\":" + json_array(c.lines) + ",\"offset\":" + std::to_string(c.next_offset) + "}",
                  "application/json");
}

// One event stream per open page; the provider is called again as long as it returns true.
void attach_events(EventStreams& streams, httplib::Response& res) {
  auto cursor = std::make_shared<EventStreams::Cursor>();
  res.set_header("Cache-Control", "no-store");
  res.set_chunked_content_provider("text/event-stream", [&streams, cursor](size_t, httplib::DataSink& sink) {
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
  const auto& o = impl_->o;
  XTRAIN_USAGE_CHECK(o.port >= 0 && o.port <= 65535, "dashboard: --port must be in 0..65535, got ", o.port);
  if (o.port == 0) {
    port_ = impl_->server.bind_to_any_port(o.host);
  } else {
    port_ = impl_->server.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  XTRAIN_USAGE_CHECK(port_ > 0, "dashboard: cannot listen on ", o.host, ":", o.port,
                     " (address in use, or not an address of this machine); try --port 0 for any free port");
  return port_;
}

void DashboardServer::run() { impl_->server.listen_after_bind(); }

int DashboardServer::start() {
  const int port = bind();
  impl_->thread = std::thread([this] { run(); });
  return port;
}

void DashboardServer::stop() {
  impl_->streams.stop();
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void DashboardServer::add_routes() {
  Impl& s = *impl_;
  auto& srv = s.server;
  const DashboardOptions& o = s.o;
  srv.new_task_queue = [] { return new httplib::ThreadPool(32); };  // each open page holds one for its events
  srv.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                           {"Referrer-Policy", "no-referrer"},
                           {"X-Frame-Options", "DENY"}});
  srv.set_pre_routing_handler([&o](const httplib::Request& req, httplib::Response& res) {
    return authorize(o, req, res);
  });
  srv.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        text(res, res.status, std::to_string(res.status) + (res.status == 404 ? " not found" : " error"));
        return httplib::Server::HandlerResponse::Handled;
      }));
  srv.Get("/", [&o](const httplib::Request&, httplib::Response& res) { serve_page(o, res); });
  srv.Get("/index.html", [&o](const httplib::Request&, httplib::Response& res) { serve_page(o, res); });
  srv.Get(R"(/static/(.*))", serve_asset);
  srv.Get("/api/runs", [&o](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(runs_json(list_runs(o.logdir)), "application/json");
  });
  srv.Get(R"(/api/runs/([^/]+)/(metrics|config|breakdown))",
          [&o](const httplib::Request& req, httplib::Response& res) { serve_run(o, req, res); });
  srv.Get("/api/events", [&s](const httplib::Request&, httplib::Response& res) { attach_events(s.streams, res); });
}

}  // namespace xtrain::monitor
