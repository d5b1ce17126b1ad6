// The Gloo interface rule (comm/interface.h) over made-up interface tables: GLOO_SOCKET_IFNAME wins
// and a wrong name is an error listing the real ones; loopback masters stay on 127.0.0.1; otherwise
// the address of the route to MASTER_ADDR. Plus the two system calls on this machine's loopback.
#include <gtest/gtest.h>

#include "support/errors.h"
#include "xtrain/comm/interface.h"

namespace xtrain::comm::interface_test {
namespace {

const std::vector<NetInterface> kTable = {
    {"eth0", "10.0.0.2", false}, {"eth1", "192.168.5.9", false}, {"lo", "127.0.0.1", true}, {"lo", "::1", true}};

TEST(GlooInterface, EnvironmentWinsEvenForALoopbackMaster) {
  const auto d = choose_gloo_devices("127.0.0.1", "eth1", kTable, "", "");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].by_interface);
  EXPECT_EQ(d[0].value, "eth1");
  const auto two = choose_gloo_devices("10.0.0.1", "eth0,eth1", kTable, "10.0.0.2", "");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].value, "eth0");
  EXPECT_EQ(two[1].value, "eth1");
}

TEST(GlooInterface, UnknownEnvironmentNameIsAnErrorListingTheRealOnes) {
  const std::string m = testing::expect_usage_error([] { choose_gloo_devices("10.0.0.1", "eth9", kTable, "", ""); });
  EXPECT_NE(m.find("GLOO_SOCKET_IFNAME names interface 'eth9'"), std::string::npos) << m;
  EXPECT_NE(m.find("eth0 10.0.0.2, eth1 192.168.5.9, lo 127.0.0.1 ::1"), std::string::npos) << m;
  const std::string second =
      testing::expect_usage_error([] { choose_gloo_devices("10.0.0.1", "eth0,wlan0", kTable, "", ""); });
  EXPECT_NE(second.find("'wlan0'"), std::string::npos) << second;
}

TEST(GlooInterface, LoopbackMastersBindLoopback) {
  for (const char* master : {"127.0.0.1", "localhost", "127.0.1.1", "::1"}) {
    const auto d = choose_gloo_devices(master, "", kTable, "", "");
    ASSERT_EQ(d.size(), 1u);
    EXPECT_FALSE(d[0].by_interface);
    EXPECT_EQ(d[0].value, "127.0.0.1") << master;
  }
}

TEST(GlooInterface, OtherMastersBindTheRouteSourceAddress) {
  // On node 1 the route to the master leaves through eth0; on the master itself the route's
  // source is the master's own address (the kernel answers with the address --master-addr names).
  const auto d = choose_gloo_devices("10.0.0.1", "", kTable, "10.0.0.2", "");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].by_interface);
  EXPECT_EQ(d[0].value, "10.0.0.2");
  EXPECT_NE(d[0].reason.find("eth0"), std::string::npos) << d[0].reason;
  const auto master = choose_gloo_devices("192.168.5.9", "", kTable, "192.168.5.9", "");
  EXPECT_EQ(master[0].value, "192.168.5.9");
  EXPECT_NE(master[0].reason.find("eth1"), std::string::npos) << master[0].reason;
}

TEST(GlooInterface, NoRouteIsAnErrorNamingTheMaster) {
  const std::string m = testing::expect_usage_error(
      [] { choose_gloo_devices("10.9.9.9", "", kTable, "", "no route to 10.9.9.9: Network is unreachable"); });
  EXPECT_NE(m.find("MASTER_ADDR 10.9.9.9"), std::string::npos) << m;
  EXPECT_NE(m.find("Network is unreachable"), std::string::npos) << m;
  EXPECT_NE(m.find("GLOO_SOCKET_IFNAME"), std::string::npos) << m;
}

TEST(GlooInterface, ThisMachinesLoopback) {
  const auto table = list_interfaces();
  bool has_lo = false;
  for (const auto& i : table) has_lo = has_lo || (i.loopback && i.address == "127.0.0.1");
  EXPECT_TRUE(has_lo);
  std::string why;
  EXPECT_EQ(route_source_address("127.0.0.1", &why), "127.0.0.1") << why;
  EXPECT_EQ(route_source_address("no-such-host.invalid", &why), "");
  EXPECT_NE(why.find("does not resolve"), std::string::npos) << why;
}

}  // namespace
}  // namespace xtrain::comm::interface_test
