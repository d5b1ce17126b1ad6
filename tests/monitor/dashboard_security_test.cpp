// Who may read the dashboard and what it will read: the token (401 on every route without it, of
// any wrong value or length; a bearer header; ?token= traded once for an HttpOnly SameSite=Strict
// cookie and a page that moves on to the URL without it), traversal on every route that takes a file or run name
// (plain, %-encoded, absolute, symlinks leaving the log folder), the bound on open event streams,
// and the refusal to listen on a non-loopback address without a token. Traffic goes to 127.0.0.1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/monitor/dashboard_auth.h"
#include "xtrain/monitor/dashboard_server.h"
#include "xtrain/monitor/httplib_includes.h"

namespace xtrain::monitor::dashboard_security_test {
namespace {
namespace fs = std::filesystem;

const std::string kToken = "0123456789abcdef-T0KEN";
const std::string kSecret = "OUTSIDE-SECRET-42";  // in files outside the log folder only

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::app) << text; }

// runs/alpha (a run), runs/latest -> alpha (a link inside: allowed), and links that leave it:
// runs/escaped -> outside/ (a whole run), runs/linked-config/config.json -> outside/config.json,
// runs/linked-metrics/metrics.jsonl -> outside/metrics.jsonl.
std::string make_logdir() {
  const std::string root = testing::temp_dir("dash-sec");
  const std::string dir = root + "/runs", outside = root + "/outside";
  for (const char* d : {"/alpha", "/linked-config", "/linked-metrics"}) fs::create_directories(dir + d);
  fs::create_directories(outside);
  write(dir + "/alpha/metrics.jsonl", "{\"step\":1,\"train/loss\":2,\"time/step_ms\":3}\n");
  write(dir + "/alpha/config.json", "{\"steps\": 1}\n");
  write(outside + "/metrics.jsonl", "{\"step\":1,\"" + kSecret + "\":1,\"time/" + kSecret + "_ms\":1}\n");
  write(outside + "/config.json", "{\"" + kSecret + "\": 1}\n");
  write(dir + "/linked-config/metrics.jsonl", "{\"step\":1}\n");
  fs::create_symlink(outside + "/config.json", dir + "/linked-config/config.json");
  fs::create_symlink(outside + "/metrics.jsonl", dir + "/linked-metrics/metrics.jsonl");
  fs::create_directory_symlink(outside, dir + "/escaped");
  fs::create_directory_symlink("alpha", dir + "/latest");
  return dir;
}

struct Served {
  std::unique_ptr<DashboardServer> server;
  std::unique_ptr<httplib::Client> client;
  int port = 0;
};

Served serve(const std::string& logdir, const std::string& token, int max_streams = 16) {
  std::signal(SIGPIPE, SIG_IGN);  // cpp-httplib writes without MSG_NOSIGNAL; `xtrain dashboard` does the same
  DashboardOptions o;
  o.logdir = logdir;
  o.port = 0;
  o.token = token;
  o.poll_seconds = 0.05;
  o.max_streams = max_streams;
  Served s;
  s.server = std::make_unique<DashboardServer>(o);
  s.port = s.server->start();
  s.client = std::make_unique<httplib::Client>("127.0.0.1", s.port);
  s.client->set_read_timeout(std::chrono::seconds(10));
  return s;
}

// Status of a GET; for event streams the status line only (the stream is then dropped).
int status(httplib::Client& c, const std::string& path, const httplib::Headers& headers = {},
           std::string* body = nullptr) {
  int code = -1;
  auto r = c.Get(path, headers, [&](const httplib::Response& res) {
    code = res.status;
    return res.get_header_value("Content-Type") != "text/event-stream";
  }, [&](const char* data, size_t n) {
    if (body != nullptr) body->append(data, n);
    return true;
  });
  (void)r;
  return code;
}

// The raw response to a request target sent exactly as written (such as "//evil.example/"):
// HTTP/1.0, so the server closes the connection after it.
std::string raw_get(int port, const std::string& target) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

const std::vector<std::string> kRoutes = {"/",
                                          "/index.html",
                                          "/static/app.js",
                                          "/static/vendor/uPlot.iife.min.js",
                                          "/api/runs",
                                          "/api/runs/alpha/metrics",
                                          "/api/runs/alpha/config",
                                          "/api/runs/alpha/breakdown",
                                          "/api/events",
                                          "/no-such-route"};

TEST(DashboardAuth, UnauthorizedOnEveryRoute) {
  auto s = serve(make_logdir(), kToken);
  const std::string cookie = session_cookie_name(s.port);
  const std::vector<httplib::Headers> wrong = {
      {},
      {{"Authorization", "Bearer wrong"}},
      {{"Authorization", "Bearer " + kToken.substr(0, 5)}},       // a prefix: shorter
      {{"Authorization", "Bearer " + kToken + "x"}},              // longer
      {{"Authorization", "Bearer " + kToken.substr(0, kToken.size() - 1) + "X"}},  // same length
      {{"Authorization", "Bearer"}},
      {{"Authorization", "bearer " + kToken}},                    // scheme is case-sensitive here
      {{"Authorization", kToken}},
      {{"Cookie", cookie + "=" + kToken}},                        // the cookie holds a session, not the token
      {{"Cookie", cookie + "=0000"}},
      {{"Cookie", session_cookie_name(s.port + 1) + "=x"}},
  };
  for (const auto& route : kRoutes) {
    for (const auto& h : wrong) {
      std::string body;
      EXPECT_EQ(status(*s.client, route, h, &body), 401) << route << " " << (h.empty() ? "" : h.begin()->second);
      EXPECT_EQ(body.find(kToken), std::string::npos);
    }
    for (const std::string& q : std::vector<std::string>{"?token=", "?token=wrong", "?token=" + kToken.substr(1),
                                                         "?token=" + kToken + "0"}) {
      EXPECT_EQ(status(*s.client, route + q), 401) << route << q;
    }
  }
  auto page = s.client->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->get_header_value("WWW-Authenticate"), "Bearer");
}

TEST(DashboardAuth, BearerHeaderOnEveryRoute) {
  auto s = serve(make_logdir(), kToken);
  for (const auto& route : kRoutes) {
    const int want = route == "/no-such-route" ? 404 : 200;
    EXPECT_EQ(status(*s.client, route, {{"Authorization", "Bearer " + kToken}}), want) << route;
  }
}

TEST(DashboardAuth, TokenInUrlBecomesCookieAndLeavesTheUrl) {
  auto s = serve(make_logdir(), kToken);
  auto r = s.client->Get("/?token=" + url_encode(kToken) + "&view=a%20b&x=1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("<meta http-equiv=\"refresh\" content=\"0; url=/?view=a%20b&amp;x=1\">"), std::string::npos)
      << r->body;
  EXPECT_EQ(r->body.find(kToken), std::string::npos) << r->body;
  EXPECT_EQ(r->get_header_value("Cache-Control"), "no-store");
  const std::string set = r->get_header_value("Set-Cookie");
  EXPECT_EQ(set.rfind(session_cookie_name(s.port) + "=", 0), 0u) << set;
  for (const char* attr : {"; HttpOnly", "; SameSite=Strict", "; Path=/"}) EXPECT_NE(set.find(attr), std::string::npos) << set;
  EXPECT_EQ(set.find(kToken), std::string::npos) << "the cookie must not hold the token";
  const std::string pair = set.substr(0, set.find(';'));
  for (const auto& route : kRoutes) {
    EXPECT_EQ(status(*s.client, route, {{"Cookie", "other=1; " + pair}}), route == "/no-such-route" ? 404 : 200)
        << route;
  }
  // The redirect keeps the path, and only this server's paths.
  const std::string refresh = "<meta http-equiv=\"refresh\" content=\"0; url=";
  EXPECT_NE(raw_get(s.port, "/static/app.js?token=" + kToken).find(refresh + "/static/app.js\">"), std::string::npos);
  const std::string odd = raw_get(s.port, "/a%0d%0a%22%3E%3Cscript%3E?token=" + kToken);  // CR LF, quote, tag
  EXPECT_NE(odd.find(refresh + "/a%0D%0A%22%3E%3Cscript%3E\">"), std::string::npos) << odd;
  EXPECT_EQ(odd.find("<script>"), std::string::npos) << odd;
  const std::string away = raw_get(s.port, "//evil.example/?token=" + kToken);  // another host, to a browser
  EXPECT_NE(away.find(refresh + "/\">"), std::string::npos) << away;
}

TEST(DashboardAuth, PureFunctions) {
  EXPECT_TRUE(same_secret("abc", "abc"));
  EXPECT_FALSE(same_secret("abd", "abc"));
  EXPECT_FALSE(same_secret("ab", "abc"));
  EXPECT_FALSE(same_secret("abcd", "abc"));
  EXPECT_FALSE(same_secret("", ""));  // no secret configured never matches
  EXPECT_EQ(random_session().size(), 64u);
  EXPECT_NE(random_session(), random_session());
  EXPECT_EQ(cookie_value("a=1; xtrain_dashboard_80=s; b=2", "xtrain_dashboard_80"), "s");
  EXPECT_EQ(cookie_value("xtrain_dashboard_8080=s", "xtrain_dashboard_80"), "");
  EXPECT_EQ(location_without_token("//evil.example/x", {{"token", "t"}}), "/");
  EXPECT_EQ(location_without_token("relative", {}), "/");
  EXPECT_EQ(location_without_token("/api/runs", {{"a", "1"}, {"token", "t"}, {"token", "u"}}), "/api/runs?a=1");
  EXPECT_EQ(location_without_token("/a b\"<", {}), "/a%20b%22%3C");
  EXPECT_NE(handoff_page("/?a=1&b=2").find("url=/?a=1&amp;b=2\""), std::string::npos);
  for (const char* yes : {"127.0.0.1", "127.255.3.4", "::1", "[::1]", "localhost", "LocalHost", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(is_loopback_host(yes)) << yes;
  }
  for (const char* no : {"0.0.0.0", "::", "", "127.evil.example", "127.0.0.1.nip.io", "10.0.0.1", "128.0.0.1",
                         "192.168.1.10", "::2", "[::ffff:10.0.0.1]", "localhost.evil.example"}) {
    EXPECT_FALSE(is_loopback_host(no)) << no;
  }
}

TEST(DashboardFiles, TraversalRefusedOnEveryFileRoute) {
  auto s = serve(make_logdir(), "");
  std::vector<std::string> bad_names = {"..", "%2e%2e", "%2E%2E", ".%2e", "..%2f..%2fetc", "%2fetc", "%2Fetc%2Fpasswd",
                                        "..%5c..%5cetc", "escaped", "linked-metrics", "%00", "."};
  for (const char* what : {"metrics", "config", "breakdown"}) {
    for (const auto& name : bad_names) {
      std::string body;
      const std::string path = "/api/runs/" + name + "/" + what;
      const int code = status(*s.client, path, {}, &body);
      EXPECT_TRUE(code == 400 || code == 404) << path << " -> " << code;
      EXPECT_EQ(body.find(kSecret), std::string::npos) << path;
      EXPECT_EQ(body.find("root:"), std::string::npos) << path;
    }
  }
  std::string body;
  EXPECT_EQ(status(*s.client, "/api/runs/linked-config/config", {}, &body), 404);
  EXPECT_EQ(body.find(kSecret), std::string::npos);
  EXPECT_EQ(status(*s.client, "/api/runs/linked-config/metrics"), 200);  // its own metrics.jsonl is inside
  EXPECT_EQ(status(*s.client, "/api/runs/latest/config"), 200);          // a link that stays inside
  for (const char* p : {"/static/../../../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd", "/static/..%2f..%2fetc%2fpasswd",
                        "/static//etc/passwd", "/static/%2Fetc%2Fpasswd", "/static/vendor/..\\index.html",
                        "/static/..%5cindex.html", "/static/%2E%2E/index.html", "/static/.%2e/app.js"}) {
    body.clear();
    EXPECT_EQ(status(*s.client, p, {}, &body), 400) << p;
    EXPECT_EQ(body.find("root:"), std::string::npos) << p;
  }
  body.clear();
  status(*s.client, "/api/runs", {}, &body);
  EXPECT_NE(body.find("\"alpha\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"latest\""), std::string::npos) << body;
  for (const char* gone : {"escaped", "linked-metrics", kSecret.c_str()}) EXPECT_EQ(body.find(gone), std::string::npos) << gone;
  for (const auto& run : nlohmann::json::parse(body)) {
    EXPECT_EQ(run["has_config"], run["name"] != "linked-config") << "linked-config's config.json is outside: " << body;
  }
}

TEST(DashboardFiles, EventStreamReadsNothingOutside) {
  auto s = serve(make_logdir(), "");
  std::string received;
  s.client->Get("/api/events", [&](const char* data, size_t n) {
    received.append(data, n);
    // Runs come in name order within one write: the last valid one, then the end of its event.
    const bool all = received.find("\"run\":\"linked-config\"") != std::string::npos &&
                     received.size() >= 2 && received.compare(received.size() - 2, 2, "\n\n") == 0;
    return !all;
  });
  EXPECT_NE(received.find("{\"run\":\"alpha\""), std::string::npos) << received;
  EXPECT_EQ(received.find(kSecret), std::string::npos) << received;
  EXPECT_EQ(received.find("escaped"), std::string::npos) << received;
}

TEST(DashboardStreams, BoundedWith503AndRetryAfter) {
  const std::string logdir = make_logdir();
  auto s = serve(logdir, "", /*max_streams=*/2);
  struct Stream {
    std::thread thread;
    std::atomic<bool> open{false}, quit{false};
  };
  std::vector<std::unique_ptr<Stream>> streams;
  auto open_stream = [&] {
    auto st = std::make_unique<Stream>();
    Stream* raw = st.get();
    const int port = s.port;
    raw->thread = std::thread([raw, port] {
      httplib::Client c("127.0.0.1", port);
      c.Get("/api/events", [raw](const char*, size_t) {
        raw->open = true;
        return !raw->quit.load();
      });
    });
    streams.push_back(std::move(st));
    return raw;
  };
  auto wait_until = [](const std::function<bool()>& f) {  // a generous bound, not a timing assertion
    for (int i = 0; i < 600; ++i) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  Stream* first = open_stream();
  Stream* second = open_stream();
  ASSERT_TRUE(wait_until([&] { return first->open && second->open; }));
  auto over = s.client->Get("/api/events");
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 503);
  EXPECT_EQ(over->get_header_value("Retry-After"), "10");
  EXPECT_NE(over->body.find("--max-streams"), std::string::npos) << over->body;
  EXPECT_EQ(status(*s.client, "/api/runs"), 200) << "the API is still served while the streams are full";
  // A page that goes away frees its place once its stream is next written (new lines, keep-alive).
  first->quit = true;
  int tries = 0;
  EXPECT_TRUE(wait_until([&] {
    write(logdir + "/alpha/metrics.jsonl", "{\"step\":" + std::to_string(2 + tries++) + "}\n");
    return status(*s.client, "/api/events") == 200;
  }));
  second->quit = true;
  write(logdir + "/alpha/metrics.jsonl", "{\"step\":1000}\n");
  s.server->stop();
  for (auto& st : streams) st->thread.join();
}

TEST(DashboardServer, NonLoopbackHostNeedsToken) {
  for (const char* host : {"0.0.0.0", "::", "192.0.2.1", "127.evil.example"}) {
    DashboardOptions o;
    o.host = host;
    o.port = 0;
    DashboardServer server(o);
    try {
      server.bind();
      ADD_FAILURE() << host << ": bound without a token";
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--token T"), std::string::npos) << m;
      EXPECT_NE(m.find("--host 127.0.0.1"), std::string::npos) << m;
    }
  }
}

TEST(DashboardCommand, RefusesNonLoopbackWithoutTokenExitTwo) {
  const std::string dir = testing::temp_dir("dash-cli");
  for (const char* host : {"0.0.0.0", "192.0.2.1"}) {
    std::string out;
    const int code = testing::run_command(
        testing::xtrain_binary() + " dashboard --host " + host + " --port 0 --logdir " + dir, &out);
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("is not a loopback address"), std::string::npos) << out;
    EXPECT_NE(out.find("add --token T"), std::string::npos) << out;
    EXPECT_NE(out.find("--host 127.0.0.1"), std::string::npos) << out;
  }
}

TEST(DashboardCommand, NeverPrintsTheToken) {
  const std::string dir = testing::temp_dir("dash-cli-token");
  const std::string token = "short-Secret";  // < 16 characters: the warning path runs too
  // Started in the background; once it has printed its address, SIGTERM (a background job of a
  // script ignores SIGINT): it stops cleanly (exit 0) and everything it printed is in `out`.
  auto run = [&](const std::string& env, const std::string& args, std::string* out) {
    const std::string log = dir + "/out.txt";
    return testing::run_command(env + " " + testing::xtrain_binary() + " dashboard --port 0 --logdir " + dir + args +
                                    " >" + log + " 2>&1 & pid=$!; for i in $(seq 600); do grep -q 'dashboard: http' " +
                                    log + " && break; sleep 0.1; done; kill -TERM $pid; wait $pid; code=$?; cat " + log +
                                    "; exit $code",
                                out);
  };
  std::string out;
  EXPECT_EQ(run("", " --token " + token, &out), 0) << out;
  EXPECT_NE(out.find("dashboard: http://127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find("?token=<your --token>"), std::string::npos) << out;
  EXPECT_NE(out.find("has 12 characters"), std::string::npos) << out;
  EXPECT_EQ(out.find(token), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(run("XTRAIN_DASHBOARD_TOKEN=" + token, "", &out), 0) << out;
  EXPECT_NE(out.find("?token=<your --token>"), std::string::npos) << "the token from the environment: " << out;
  EXPECT_EQ(out.find(token), std::string::npos) << out;
}

}  // namespace
}  // namespace xtrain::monitor::dashboard_security_test
