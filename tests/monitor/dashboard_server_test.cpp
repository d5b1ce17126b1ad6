// The dashboard server in-process on a free loopback port, spoken to with cpp-httplib's client:
// pages and bundled files, traversal attempts (plain and %-encoded) refused, the run API, the
// token on every request, the Host check, and server-sent events delivering appended lines
// (access and traversal in depth: dashboard_security_test.cpp).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "support/paths.h"
#include "xtrain/monitor/dashboard_events.h"
#include "xtrain/monitor/dashboard_server.h"
#include "xtrain/monitor/httplib_includes.h"

namespace xtrain::monitor::dashboard_server_test {
namespace {
namespace fs = std::filesystem;

// A legal run name that is also HTML: the page must show it as text.
const std::string kHtmlName = "<img src=x onerror=alert(1)>";

void append(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::app) << text; }

std::string make_logdir() {
  const std::string dir = testing::temp_dir("dash") + "/runs";
  fs::create_directories(dir + "/alpha");
  fs::create_directories(dir + "/not-a-run");  // no metrics.jsonl: not listed
  fs::create_directories(dir + "/" + kHtmlName);
  append(dir + "/alpha/config.json", "{\"steps\": 3}\n");
  for (int s = 1; s <= 3; ++s) {
    append(dir + "/alpha/metrics.jsonl",
           c10::str("{\"step\":", s, ",\"train/loss\":", 4 - s, ",\"time/forward_ms\":", s, ",\"time/step_ms\":", 2 * s,
                    "}\n"));
  }
  append(dir + "/" + kHtmlName + "/metrics.jsonl", "{\"step\":1,\"train/loss\":1}\n");
  return dir;
}

struct Served {
  std::unique_ptr<DashboardServer> server;
  std::unique_ptr<httplib::Client> client;
};

Served serve(const std::string& logdir, const std::string& token = "") {
  DashboardOptions o;
  o.logdir = logdir;
  o.port = 0;
  o.token = token;
  o.poll_seconds = 0.05;
  Served s;
  s.server = std::make_unique<DashboardServer>(o);
  const int port = s.server->start();
  s.client = std::make_unique<httplib::Client>("127.0.0.1", port);
  s.client->set_read_timeout(std::chrono::seconds(10));
  return s;
}

int status(httplib::Client& c, const std::string& path, const httplib::Headers& headers = {}) {
  auto r = c.Get(path, headers);
  return r ? r->status : -1;
}

TEST(DashboardServer, PageAndBundledFilesOnly) {
  auto s = serve(make_logdir());
  auto page = s.client->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<html"), std::string::npos);
  EXPECT_EQ(page->body.find("{{TOKEN_QUERY}}"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  auto js = s.client->Get("/static/vendor/uPlot.iife.min.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_GT(js->body.size(), 40000u);
  for (const char* bad : {"/static/../../../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd",
                          "/static/..%2f..%2fetc%2fpasswd", "/static//etc/passwd", "/static/vendor/..\\index.html",
                          "/static/%2E%2E/index.html"}) {
    auto r = s.client->Get(bad);
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_EQ(r->body.find("root:"), std::string::npos) << bad;
  }
  EXPECT_EQ(status(*s.client, "/static/no-such-file.js"), 404);
  EXPECT_EQ(status(*s.client, "/static/%252e%252e/index.html"), 404);  // double-encoded: a literal "%2e%2e" name
  EXPECT_EQ(status(*s.client, "/etc/passwd"), 404);
}

TEST(DashboardServer, RunApi) {
  const std::string logdir = make_logdir();
  auto s = serve(logdir);
  auto runs = s.client->Get("/api/runs");
  ASSERT_TRUE(runs);
  const auto j = nlohmann::json::parse(runs->body);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["name"], kHtmlName);
  EXPECT_EQ(j[1]["name"], "alpha");
  EXPECT_EQ(j[1]["last_step"], 3);
  EXPECT_EQ(j[1]["has_config"], true);
  EXPECT_NEAR(j[1]["last_update"].get<double>(), std::time(nullptr), 600);
  auto metrics = s.client->Get("/api/runs/alpha/metrics");
  ASSERT_TRUE(metrics);
  const auto m = nlohmann::json::parse(metrics->body);
  EXPECT_EQ(m["records"].size(), 3u);
  EXPECT_EQ(m["records"][2]["train/loss"], 1);
  EXPECT_EQ(m["offset"], fs::file_size(logdir + "/alpha/metrics.jsonl"));
  auto config = s.client->Get("/api/runs/alpha/config");
  ASSERT_TRUE(config);
  EXPECT_EQ(nlohmann::json::parse(config->body)["steps"], 3);
  auto breakdown = s.client->Get("/api/runs/alpha/breakdown");
  ASSERT_TRUE(breakdown);
  const auto b = nlohmann::json::parse(breakdown->body);
  EXPECT_EQ(b["steps"], 2);  // three steps, the first left out
  EXPECT_EQ(b["stages"][0]["stage"], "forward");
  EXPECT_DOUBLE_EQ(b["stages"][0]["mean_ms"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(b["stages"][0]["share"].get<double>(), 0.5);
  EXPECT_EQ(status(*s.client, "/api/runs/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E/metrics"), 200);
  EXPECT_EQ(status(*s.client, "/api/runs/%2e%2e/metrics"), 400);
  EXPECT_EQ(status(*s.client, "/api/runs/not-a-run/metrics"), 404);
  EXPECT_EQ(status(*s.client, "/api/runs/missing/config"), 404);
  EXPECT_EQ(status(*s.client, "/api/runs/..%2F..%2Fetc/config"), 404);  // decoded "../../etc" has '/': no route
  EXPECT_EQ(status(*s.client, "/", {{"Host", "evil.example:6006"}}), 403);  // DNS rebinding
}

TEST(DashboardServer, TokenOnEveryRequest) {  // in depth: dashboard_security_test.cpp
  auto s = serve(make_logdir(), "s3cr&t");
  EXPECT_EQ(status(*s.client, "/"), 401);
  EXPECT_EQ(status(*s.client, "/api/runs"), 401);
  EXPECT_EQ(status(*s.client, "/static/vendor/uPlot.iife.min.js"), 401);
  EXPECT_EQ(status(*s.client, "/?token=wrong"), 401);
  EXPECT_EQ(status(*s.client, "/api/runs", {{"Authorization", "Bearer nope"}}), 401);
  EXPECT_EQ(status(*s.client, "/api/runs", {{"Authorization", "Bearer s3cr&t"}}), 200);
  auto page = s.client->Get("/?token=s3cr%26t");  // URL-encoded in the URL
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);  // a page that moves on to "/" and sets the session cookie
  EXPECT_NE(page->body.find("url=/\""), std::string::npos) << page->body;
  const std::string cookie = page->get_header_value("Set-Cookie");
  auto again = s.client->Get("/", {{"Cookie", cookie.substr(0, cookie.find(';'))}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(again->body.find("s3cr"), std::string::npos);  // the page never holds the token
}

TEST(DashboardServer, EventsDeliverAppendedLines) {
  const std::string logdir = make_logdir();
  auto s = serve(logdir);
  std::mutex mu;
  std::string received;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    s.client->Get("/api/events", [&](const char* data, size_t n) {
      std::lock_guard<std::mutex> lock(mu);
      received.append(data, n);
      return !done.load();
    });
  });
  auto wait_for = [&](const std::string& needle) {  // a generous bound, not a timing assertion
    for (int i = 0; i < 400; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (received.find(needle) != std::string::npos) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  };
  EXPECT_TRUE(wait_for("event: reset"));
  EXPECT_TRUE(wait_for("\"step\":3"));
  append(logdir + "/alpha/metrics.jsonl", "{\"step\":4,\"train/loss\":0.5}\n");
  EXPECT_TRUE(wait_for("\"step\":4"));
  fs::create_directories(logdir + "/beta");
  append(logdir + "/beta/metrics.jsonl", "{\"step\":1,\"train/loss\":9}\n");
  EXPECT_TRUE(wait_for("\"name\":\"beta\""));
  EXPECT_TRUE(wait_for("{\"run\":\"beta\",\"records\":[{\"step\":1"));
  done = true;
  append(logdir + "/alpha/metrics.jsonl", "{\"step\":5}\n");  // wakes the receiver so it can cancel
  reader.join();
  s.server->stop();
}

TEST(EventStreams, PartialLinesWaitAndShrunkFilesRestart) {
  const std::string logdir = make_logdir();
  const std::string file = logdir + "/alpha/metrics.jsonl";
  EventStreams streams(logdir, 0.01);
  EventStreams::Cursor c;
  const std::string first = streams.poll(c);
  EXPECT_EQ(first.find("event: reset"), first.find("retry: 2000\n") + 12);
  EXPECT_NE(first.find("event: runs"), std::string::npos);
  EXPECT_NE(first.find("{\"run\":\"alpha\",\"records\":[{\"step\":1"), std::string::npos);
  EXPECT_EQ(streams.poll(c), "");
  append(file, "{\"step\":4,");  // a line still being written
  EXPECT_EQ(streams.poll(c), "");
  append(file, "\"train/loss\":0.25}\n");
  EXPECT_NE(streams.poll(c).find("{\"run\":\"alpha\",\"records\":[{\"step\":4,\"train/loss\":0.25}]}"),
            std::string::npos);
  std::ofstream(file, std::ios::trunc) << "{\"step\":1}\n";  // a new run under the same name
  const std::string again = streams.poll(c);
  EXPECT_NE(again.find("event: restart\ndata: {\"run\":\"alpha\"}"), std::string::npos);
  EXPECT_NE(again.find("{\"run\":\"alpha\",\"records\":[{\"step\":1}]}"), std::string::npos);
  streams.stop();
  EXPECT_FALSE(streams.wait());
}

}  // namespace
}  // namespace xtrain::monitor::dashboard_server_test
