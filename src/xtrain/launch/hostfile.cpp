// Hostfile parsing and resource filters; see hostfile.h.
#include "xtrain/launch/hostfile.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "xtrain/base/error.h"

namespace xtrain::launch {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

int parse_count(const std::string& text, const std::string& what) {
  XTRAIN_USAGE_CHECK(!text.empty() && text.size() < 7 && std::all_of(text.begin(), text.end(), ::isdigit),
                     what, ": '", text, "' is not a number");
  return std::stoi(text);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

// "host[:a,b]@host2" -> host -> slots (empty set = every slot).
std::map<std::string, std::set<int>> parse_filter(const std::string& filter, const char* flag) {
  std::map<std::string, std::set<int>> out;
  for (const auto& part : split(filter, '@')) {
    const auto colon = part.find(':');
    const std::string host = part.substr(0, colon);
    XTRAIN_USAGE_CHECK(valid_host_name(host), flag, ": bad host '", host, "' in '", filter, "'");
    auto& slots = out[host];
    if (colon == std::string::npos) continue;
    for (const auto& s : split(part.substr(colon + 1), ',')) slots.insert(parse_count(s, flag));
    XTRAIN_USAGE_CHECK(!slots.empty(), flag, ": '", part, "' lists no slots");
  }
  return out;
}

void check_known(const std::map<std::string, std::set<int>>& filter, const std::vector<HostEntry>& hosts,
                 const char* flag) {
  for (const auto& [host, slots] : filter) {
    auto it = std::find_if(hosts.begin(), hosts.end(), [&](const HostEntry& h) { return h.host == host; });
    XTRAIN_USAGE_CHECK(it != hosts.end(), flag, ": host '", host, "' is not in the hostfile");
    for (int s : slots) {
      XTRAIN_USAGE_CHECK(s < it->slots, flag, ": host '", host, "' has ", it->slots, " slots; there is no slot ", s);
    }
  }
}

}  // namespace

bool valid_host_name(const std::string& host) {
  if (host.empty() || host.size() > 253 || !std::isalnum(static_cast<unsigned char>(host[0]))) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

std::vector<HostEntry> parse_hostfile(const std::string& text, const std::string& origin) {
  std::vector<HostEntry> hosts;
  std::stringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::stringstream words(line);
    std::string host, slots, extra;
    words >> host >> slots >> extra;
    const std::string where = c10::str(origin, ":", n);
    XTRAIN_USAGE_CHECK(slots.rfind("slots=", 0) == 0 && extra.empty(), where, ": expected 'HOST slots=N', got '",
                       line, "'");
    XTRAIN_USAGE_CHECK(valid_host_name(host), where, ": '", host,
                       "' is not a valid host name (letters, digits, '.', '-', '_')");
    const int count = parse_count(slots.substr(6), where);
    XTRAIN_USAGE_CHECK(count >= 1, where, ": slots must be >= 1, got ", count);
    for (const auto& h : hosts) XTRAIN_USAGE_CHECK(h.host != host, where, ": host '", host, "' is listed twice");
    hosts.push_back({host, count});
  }
  XTRAIN_USAGE_CHECK(!hosts.empty(), origin, ": no hosts (expected lines 'HOST slots=N')");
  return hosts;
}

std::vector<HostEntry> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  XTRAIN_USAGE_CHECK(in.good(), "--hostfile: cannot read '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hostfile(ss.str(), path);
}

std::vector<NodeSlots> select_slots(const std::vector<HostEntry>& hosts, const std::string& include,
                                    const std::string& exclude, int num_nodes, int slots_per_node) {
  XTRAIN_USAGE_CHECK(include.empty() || exclude.empty(), "--include and --exclude are mutually exclusive");
  const auto inc = parse_filter(include, "--include");
  const auto exc = parse_filter(exclude, "--exclude");
  check_known(inc, hosts, "--include");
  check_known(exc, hosts, "--exclude");
  std::vector<NodeSlots> out;
  for (const auto& h : hosts) {
    NodeSlots node{h.host, {}};
    for (int s = 0; s < h.slots; ++s) {
      if (!include.empty()) {
        auto it = inc.find(h.host);
        if (it == inc.end() || (!it->second.empty() && !it->second.count(s))) continue;
      }
      if (auto it = exc.find(h.host); it != exc.end() && (it->second.empty() || it->second.count(s))) continue;
      node.slots.push_back(s);
    }
    if (slots_per_node > 0 && static_cast<int>(node.slots.size()) > slots_per_node) node.slots.resize(slots_per_node);
    if (!node.slots.empty()) out.push_back(std::move(node));
  }
  if (num_nodes > 0 && static_cast<int>(out.size()) > num_nodes) out.resize(num_nodes);
  XTRAIN_USAGE_CHECK(!out.empty(), "launch: the hostfile filters left no slots to run on");
  return out;
}

}  // namespace xtrain::launch
