// Trial processes over base/subprocess.h (spawn, reap, signal the group), and a non-blocking line
// reader over metrics.jsonl.
#include "xtrain/tune/process.h"

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/base/subprocess.h"

namespace xtrain::tune {

void check_executable(const std::string& program) {
  XTRAIN_USAGE_CHECK(!program.empty(), "tune: the trial command is empty");
  if (program.find('/') != std::string::npos) {
    XTRAIN_USAGE_CHECK(!find_executable(program).empty(), "tune: the trial command '", program,
                       "' is not an executable file");
    return;
  }
  XTRAIN_USAGE_CHECK(!find_executable(program).empty(), "tune: the trial command '", program, "' is not on PATH");
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  std::swap(pid_, o.pid_);
  std::swap(exited_, o.exited_);
  std::swap(exit_code_, o.exit_code_);
  std::swap(signal_, o.signal_);
  return *this;
}

ChildProcess::~ChildProcess() {
  if (running()) terminate(2.0);
}

ChildProcess ChildProcess::start(const Command& command, const std::string& stdout_path,
                                 const std::string& stderr_path) {
  TORCH_INTERNAL_ASSERT(!command.argv.empty(), "ChildProcess: empty command");
  SpawnOptions o;
  o.argv = command.argv;
  o.env = command.env;
  o.stdout_path = stdout_path;
  o.stderr_path = stderr_path;
  o.parent_death_signal = SIGTERM;  // a killed study leaves no orphans
  o.exec_error = "tune: cannot execute the trial command";
  ChildProcess p;
  p.pid_ = spawn_process(o);
  return p;
}

bool ChildProcess::poll() {
  if (pid_ <= 0 || exited_) return exited_;
  const auto e = try_wait(pid_);
  if (!e) return false;
  exited_ = true;
  exit_code_ = e->code;
  signal_ = e->signal;
  return true;
}

void ChildProcess::terminate(double grace_seconds) {
  if (!running()) return;
  kill_group(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  while (!poll()) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill_group(pid_, SIGKILL);
      wait_process(pid_);
      exited_ = true;
      signal_ = SIGKILL;
      exit_code_ = 128 + SIGKILL;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid_, SIGKILL);  // anything the trial left behind in its group
}

std::string ChildProcess::describe_exit() const {
  if (signal_ != 0) return "killed by signal " + std::to_string(signal_) + " (" + strsignal(signal_) + ")";
  return "exit code " + std::to_string(exit_code_);
}

std::vector<std::pair<int64_t, double>> MetricsTail::read_new() {
  std::vector<std::pair<int64_t, double>> out;
  std::ifstream in(path_, std::ios::binary);
  if (!in.good()) return out;
  in.seekg(offset_);
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  offset_ += static_cast<int64_t>(chunk.size());
  partial_ += chunk;
  size_t start = 0, nl = 0;
  while ((nl = partial_.find('\n', start)) != std::string::npos) {
    const std::string line = partial_.substr(start, nl - start);
    start = nl + 1;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number()) continue;
    for (const auto& key : keys_) {
      if (!j.contains(key)) continue;
      const auto& v = j[key];
      out.emplace_back(j["step"].get<int64_t>(), v.is_number() ? v.get<double>() : NAN);  // null = NaN
      break;
    }
  }
  partial_.erase(0, start);
  return out;
}

std::string file_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in.good()) return "";
  const auto size = static_cast<size_t>(in.tellg());
  const size_t from = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(from));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (from > 0) {
    const auto nl = text.find('\n');
    if (nl != std::string::npos && nl + 1 < text.size()) text.erase(0, nl + 1);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace xtrain::tune
