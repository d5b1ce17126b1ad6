// Which network interface Gloo binds (issue 23): the one that reaches the master, found by asking
// the kernel for its route to MASTER_ADDR (a UDP connect sends nothing; getsockname gives the
// source address). On the master that is the address --master-addr names. GLOO_SOCKET_IFNAME wins,
// as in torch; loopback masters keep 127.0.0.1. The choice itself is a pure function, unit-tested.
#pragma once
#include <string>
#include <vector>

namespace xtrain::comm {

struct NetInterface {
  std::string name;     // "eth0"
  std::string address;  // numeric IPv4 or IPv6
  bool loopback = false;
};

// One Gloo TCP device: bound to a named interface (GLOO_SOCKET_IFNAME) or to an address.
struct GlooDevice {
  bool by_interface = false;
  std::string value;   // interface name or numeric address
  std::string reason;  // for messages: "eth0 10.0.0.2, the route to MASTER_ADDR 10.0.0.1"
};

// Every address of every interface that is up (getifaddrs), IPv4 and IPv6.
std::vector<NetInterface> list_interfaces();

// The local address the kernel would use to reach `host`; empty with *why set when `host` does not
// resolve or no route leads there.
std::string route_source_address(const std::string& host, std::string* why);

bool is_loopback_master(const std::string& master_addr);

// The pure rule. env_ifname is GLOO_SOCKET_IFNAME (comma-separated names; empty = unset). A name
// this machine lacks is a UsageError naming it and listing the real interfaces; so is a master no
// route reaches.
std::vector<GlooDevice> choose_gloo_devices(const std::string& master_addr, const std::string& env_ifname,
                                            const std::vector<NetInterface>& interfaces,
                                            const std::string& source_address, const std::string& route_error);

// choose_gloo_devices on this machine (reads GLOO_SOCKET_IFNAME, the interfaces and the route).
std::vector<GlooDevice> gloo_devices_for(const std::string& master_addr);

std::string describe(const std::vector<GlooDevice>& devices);

}  // namespace xtrain::comm
