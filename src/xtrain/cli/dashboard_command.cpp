// `xtrain dashboard --logdir runs/ [--host 127.0.0.1] [--port 6006] [--token T]`: serves the live
// run dashboard (monitor/dashboard_server.h) until Ctrl-C. Prints the address on stdout. Signals
// are taken by one thread with sigwait, which stops the server: nothing runs in a signal handler.
#include <CLI/CLI.hpp>
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

#include "xtrain/base/log.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/monitor/dashboard_server.h"

namespace xtrain::cli {
namespace {

int serve(const monitor::DashboardOptions& o) {
  if (!monitor::is_loopback_host(o.host)) {
    log::warn("dashboard: listening on ", o.host, ": anyone who can reach this machine can read these runs",
              o.token.empty() ? "; consider --token" : "");
  }
  if (!std::filesystem::is_directory(o.logdir)) {
    log::warn("dashboard: ", o.logdir, " does not exist (yet): runs will appear once it does");
  }
  sigset_t signals;  // blocked before any server thread starts, so they all inherit the mask
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  monitor::DashboardServer server(o);
  const int port = server.bind();
  std::cout << "dashboard: " << monitor::dashboard_url(o, port) << "  (logdir " << o.logdir << "; Ctrl-C stops)"
            << std::endl;
  std::atomic<bool> signalled{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    signalled = true;
    server.stop();
  });
  server.run();
  if (!signalled) pthread_kill(waiter.native_handle(), SIGTERM);  // run() ended on its own: release the waiter
  waiter.join();
  return 0;
}

}  // namespace

Command add_dashboard(CLI::App& app) {
  auto* cmd = app.add_subcommand("dashboard", "Serve a live web dashboard of the runs in a folder");
  auto o = std::make_shared<monitor::DashboardOptions>();
  cmd->add_option("--logdir,-l", o->logdir, "folder holding run directories (each with metrics.jsonl)")
      ->capture_default_str();
  cmd->add_option("--host", o->host, "address to listen on (127.0.0.1: this machine only; 0.0.0.0: all)")
      ->capture_default_str();
  cmd->add_option("--port,-p", o->port, "port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--token", o->token, "require ?token=T or 'Authorization: Bearer T' on every request");
  return {cmd, [o] { return serve(*o); }};
}

}  // namespace xtrain::cli
