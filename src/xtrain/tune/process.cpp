// fork + execvpe with everything the child needs prepared before fork (only async-signal-safe
// calls between fork and exec), and a non-blocking line reader over metrics.jsonl.
#include "xtrain/tune/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "xtrain/base/error.h"

extern char** environ;

namespace xtrain::tune {
namespace {

bool is_executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::vector<std::string> merged_environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [k, v] : extra) replaced = replaced || entry.rfind(k + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(pid_t parent, char** argv, char** envp, const char* out_path, const char* err_path) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(127);  // the study died before prctl took effect
  const int in = ::open("/dev/null", O_RDONLY);
  const int out = ::open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  const int err = ::open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (in >= 0) ::dup2(in, 0);
  if (out >= 0) ::dup2(out, 1);
  if (err >= 0) ::dup2(err, 2);
  ::execvpe(argv[0], argv, envp);
  const char* msg = "tune: cannot execute the trial command: ";
  (void)!::write(2, msg, std::strlen(msg));
  (void)!::write(2, argv[0], std::strlen(argv[0]));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

}  // namespace

void check_executable(const std::string& program) {
  XTRAIN_USAGE_CHECK(!program.empty(), "tune: the trial command is empty");
  if (program.find('/') != std::string::npos) {
    XTRAIN_USAGE_CHECK(is_executable(program), "tune: the trial command '", program, "' is not an executable file");
    return;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    if (is_executable(dirs.substr(start, end - start) + "/" + program)) return;
    start = end + 1;
  }
  XTRAIN_USAGE_ERROR("tune: the trial command '", program, "' is not on PATH");
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
  std::vector<std::string> argv = command.argv;
  std::vector<std::string> env = merged_environment(command.env);
  auto argv_c = c_strings(argv);
  auto env_c = c_strings(env);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  XTRAIN_USAGE_CHECK(pid >= 0, "tune: fork failed: ", std::strerror(errno));
  if (pid == 0) exec_child(parent, argv_c.data(), env_c.data(), stdout_path.c_str(), stderr_path.c_str());
  ::setpgid(pid, pid);  // also from the parent, so terminate() never races the child's own call
  ChildProcess p;
  p.pid_ = pid;
  return p;
}

bool ChildProcess::poll() {
  if (pid_ <= 0 || exited_) return exited_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return false;
  exited_ = true;
  if (r < 0) {
    exit_code_ = 255;  // not our child any more (should not happen): treat as a failure
  } else if (WIFEXITED(status)) {
    exit_code_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    signal_ = WTERMSIG(status);
    exit_code_ = 128 + signal_;
  }
  return true;
}

void ChildProcess::terminate(double grace_seconds) {
  if (!running()) return;
  ::kill(-pid_, SIGTERM);
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  while (!poll()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
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
