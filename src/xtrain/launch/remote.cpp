// Shell quoting and the ssh command line; see remote.h.
#include "xtrain/launch/remote.h"

#include <unistd.h>

#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/launch/hostfile.h"

namespace xtrain::launch {

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + shell_quote(w);
  return out;
}

bool valid_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::vector<std::string> ssh_argv(const std::string& host, const std::string& cwd,
                                  const std::vector<std::pair<std::string, std::string>>& env,
                                  const std::vector<std::string>& command) {
  XTRAIN_USAGE_CHECK(valid_host_name(host), "launch: refusing host name '", host,
                     "' (letters, digits, '.', '-', '_' only)");
  XTRAIN_USAGE_CHECK(!command.empty(), "launch: empty remote command");
  std::vector<std::string> words{"env"};
  for (const auto& [k, v] : env) {
    XTRAIN_USAGE_CHECK(valid_env_name(k), "launch: refusing environment variable name '", k, "'");
    words.push_back(k + "=" + v);
  }
  words.insert(words.end(), command.begin(), command.end());
  const std::string remote = "cd " + shell_quote(cwd) + " && exec " + shell_join(words);
  return {"ssh", "-o", "BatchMode=yes", "-tt", "--", host, remote};
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {0};
  return ::gethostname(name, sizeof name - 1) == 0 && host == name;
}

}  // namespace xtrain::launch
