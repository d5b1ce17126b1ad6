// The interface Gloo binds; see interface.h.
#include "xtrain/comm/interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "xtrain/base/error.h"

namespace xtrain::comm {
namespace {

std::string numeric(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  const socklen_t len = sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (::getnameinfo(sa, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) return "";
  std::string out = buf;
  const auto pct = out.find('%');  // fe80::1%eth0: the scope is the interface, named separately
  return pct == std::string::npos ? out : out.substr(0, pct);
}

std::string list_for_message(const std::vector<NetInterface>& interfaces) {
  std::ostringstream os;
  std::string last;
  for (const auto& i : interfaces) {
    if (i.name == last) {
      os << " " << i.address;
    } else {
      os << (last.empty() ? "" : ", ") << i.name << " " << i.address;
    }
    last = i.name;
  }
  return last.empty() ? "(none)" : os.str();
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

std::vector<NetInterface> list_interfaces() {
  std::vector<NetInterface> out;
  ifaddrs* head = nullptr;
  if (::getifaddrs(&head) != 0) return out;
  for (ifaddrs* a = head; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || !(a->ifa_flags & IFF_UP)) continue;
    if (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6) continue;
    const std::string addr = numeric(a->ifa_addr);
    if (!addr.empty()) out.push_back({a->ifa_name, addr, (a->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(head);
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  return out;
}

std::string route_source_address(const std::string& host, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &res);
  if (rc != 0) {
    *why = std::string("'") + host + "' does not resolve: " + ::gai_strerror(rc);
    return "";
  }
  std::string out;
  for (addrinfo* r = res; r != nullptr && out.empty(); r = r->ai_next) {
    const int fd = ::socket(r->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::connect(fd, r->ai_addr, r->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      out = numeric(reinterpret_cast<sockaddr*>(&local));
    } else {
      *why = std::string("no route to ") + numeric(r->ai_addr) + ": " + std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

bool is_loopback_master(const std::string& master_addr) {
  return master_addr == "localhost" || master_addr.rfind("127.", 0) == 0 || master_addr == "::1";
}

std::vector<GlooDevice> choose_gloo_devices(const std::string& master_addr, const std::string& env_ifname,
                                            const std::vector<NetInterface>& interfaces,
                                            const std::string& source_address, const std::string& route_error) {
  std::vector<GlooDevice> out;
  if (!env_ifname.empty()) {
    for (const auto& name : split_names(env_ifname)) {
      const bool known = std::any_of(interfaces.begin(), interfaces.end(), [&](const auto& i) { return i.name == name; });
      XTRAIN_USAGE_CHECK(known, "comm: GLOO_SOCKET_IFNAME names interface '", name,
                         "', which this machine does not have (or it is down); its interfaces: ",
                         list_for_message(interfaces), ". Set GLOO_SOCKET_IFNAME to one of them, or unset it ",
                         "to use the interface of the route to MASTER_ADDR ", master_addr);
      out.push_back({true, name, "GLOO_SOCKET_IFNAME=" + env_ifname});
    }
    XTRAIN_USAGE_CHECK(!out.empty(), "comm: GLOO_SOCKET_IFNAME='", env_ifname, "' names no interface");
    return out;
  }
  if (is_loopback_master(master_addr)) return {{false, "127.0.0.1", "loopback, MASTER_ADDR " + master_addr}};
  XTRAIN_USAGE_CHECK(!source_address.empty(), "comm: cannot find the interface that reaches MASTER_ADDR ",
                     master_addr, " (", route_error, "); check --master-addr / MASTER_ADDR, or set ",
                     "GLOO_SOCKET_IFNAME to one of this machine's interfaces: ", list_for_message(interfaces));
  std::string name = "?";
  for (const auto& i : interfaces) {
    if (i.address == source_address) name = i.name;
  }
  return {{false, source_address, name + " " + source_address + ", the route to MASTER_ADDR " + master_addr}};
}

std::vector<GlooDevice> gloo_devices_for(const std::string& master_addr) {
  const char* env = std::getenv("GLOO_SOCKET_IFNAME");
  const std::string env_ifname = env == nullptr ? "" : env;
  std::string why, source;
  if (env_ifname.empty() && !is_loopback_master(master_addr)) source = route_source_address(master_addr, &why);
  return choose_gloo_devices(master_addr, env_ifname, list_interfaces(), source, why);
}

std::string describe(const std::vector<GlooDevice>& devices) {
  std::string out;
  for (const auto& d : devices) out += (out.empty() ? "" : "; ") + d.reason;
  return out;
}

}  // namespace xtrain::comm
