// `xtrain dashboard --logdir runs/ [--host 127.0.0.1] [--port 6006] [--token T] [--max-streams N]`:
// serves the live run dashboard (monitor/dashboard_server.h) until Ctrl-C. Prints the address on
// stdout (never the token). A host other than loopback needs a token (exit 2 otherwise).
// SIGINT/SIGTERM: the handler only writes a byte to a pipe; a thread reading it stops the server.
// (sigwait would need the signals blocked in every thread, and LibTorch starts threads before
// main's code runs.) A SIGINT the shell set to ignored (a background job) stays ignored.
#include <CLI/CLI.hpp>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "xtrain/base/log.h"
#include "xtrain/cli/stop_signal.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/monitor/dashboard_auth.h"
#include "xtrain/monitor/dashboard_server.h"

namespace xtrain::cli {
namespace {

void describe(const monitor::DashboardOptions& o, int port) {
  const std::string url = monitor::dashboard_url(o, port);
  std::cout << "dashboard: " << url << "  (logdir " << o.logdir << "; Ctrl-C stops)" << std::endl;
  if (o.token.empty()) return;
  std::cout << "dashboard: open " << url << "?token=<your --token> once (the browser then keeps a session cookie),"
            << " or send 'Authorization: Bearer <token>'" << std::endl;
  if (o.token.size() < 16) {
    log::warn("dashboard: the token has ", o.token.size(), " characters: short tokens can be guessed by anyone who ",
              "can reach the port; use 16 or more random ones (openssl rand -hex 16)");
  }
}

int serve(const monitor::DashboardOptions& o) {
  if (!std::filesystem::is_directory(o.logdir)) {
    log::warn("dashboard: ", o.logdir, " does not exist (yet): runs will appear once it does");
  }
  // A page that closes while its stream is written would otherwise end the process (cpp-httplib
  // 0.11 sends without MSG_NOSIGNAL); the failed write is handled where it happens.
  std::signal(SIGPIPE, SIG_IGN);
  install_stop_signal_handlers();
  monitor::DashboardServer server(o);
  const int port = server.bind();  // refuses a non-loopback host without a token (exit 2)
  if (!monitor::is_loopback_host(o.host)) {
    log::warn("dashboard: listening on ", o.host, ": anyone who can reach this machine can try the token; ",
              "traffic is plain HTTP (put it behind TLS, or use ssh -L, off a trusted network)");
  }
  describe(o, port);
  std::thread waiter([&server] {
    wait_for_stop_signal();
    server.stop();
  });
  server.run();
  raise_stop_signal();  // run() may have ended on its own: release the waiter
  waiter.join();
  return 0;
}

}  // namespace

Command add_dashboard(CLI::App& app) {
  auto* cmd = app.add_subcommand("dashboard", "Serve a live web dashboard of the runs in a folder");
  auto o = std::make_shared<monitor::DashboardOptions>();
  cmd->add_option("--logdir,-l", o->logdir, "folder holding run directories (each with metrics.jsonl)")
      ->capture_default_str();
  cmd->add_option("--host", o->host,
                  "address to listen on (127.0.0.1: this machine only; any other, e.g. 0.0.0.0, needs --token)")
      ->capture_default_str();
  cmd->add_option("--port,-p", o->port, "port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--token", o->token,
                  "secret every request must carry (?token=T once, then a cookie; or 'Authorization: Bearer T')")
      ->envname("XTRAIN_DASHBOARD_TOKEN");
  cmd->add_option("--max-streams", o->max_streams, "open pages (event streams) served at once; more get 503")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return {cmd, [o] { return serve(*o); }};
}

}  // namespace xtrain::cli
