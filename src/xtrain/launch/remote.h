// Remote ranks over ssh without building a shell string from untrusted parts: the host is a
// separate argv element after "--" (and must pass valid_host_name), and the one string the remote
// shell parses quotes every word with a single-quote escaper ('it'\''s'), so no argument, path or
// environment value can inject shell syntax.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace xtrain::launch {

// 'text' with each ' written as '\'' : POSIX sh reads it back as exactly `text`.
std::string shell_quote(const std::string& text);
std::string shell_join(const std::vector<std::string>& words);

bool valid_env_name(const std::string& name);

// argv for: ssh -o BatchMode=yes -tt -- HOST "cd 'CWD' && exec env 'K=V'... 'PROGRAM' 'ARG'...".
// -tt gives the remote process a terminal, so it gets SIGHUP when the local ssh is stopped.
std::vector<std::string> ssh_argv(const std::string& host, const std::string& cwd,
                                  const std::vector<std::pair<std::string, std::string>>& env,
                                  const std::vector<std::string>& command);

// True for names that mean this machine (localhost, 127.x, this host name): no ssh needed.
bool is_local_host(const std::string& host);

}  // namespace xtrain::launch
