// Hostfile parsing and --include/--exclude against DeepSpeed's documented behaviour
// (reference/deepspeed.md §c.3), including host names crafted to become ssh options or shell code.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/launch/hostfile.h"

namespace xtrain::launch::hostfile_test {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST(Hostfile, ParsesHostsSlotsCommentsAndBlankLines) {
  const auto h = parse_hostfile("# cluster\nworker-0 slots=4\n\n  worker-1   slots=2  # two GPUs\n10.0.0.3 slots=1\n");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].host, "worker-0");
  EXPECT_EQ(h[0].slots, 4);
  EXPECT_EQ(h[1].host, "worker-1");
  EXPECT_EQ(h[1].slots, 2);
  EXPECT_EQ(h[2].host, "10.0.0.3");
}

TEST(Hostfile, ErrorsNameTheLine) {
  EXPECT_NE(error_of([] { parse_hostfile("a slots=1\na slots=2\n", "hf"); }).find("hf:2: host 'a' is listed twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hostfile("a slots=x\n", "hf"); }).find("hf:1"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hostfile("a 4\n", "hf"); }).find("expected 'HOST slots=N'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hostfile("a slots=0\n", "hf"); }).find("slots must be >= 1"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hostfile("a slots=1 extra\n", "hf"); }).find("expected"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hostfile("# nothing\n\n", "hf"); }).find("no hosts"), std::string::npos);
}

TEST(Hostfile, MaliciousHostNamesAreRejected) {
  for (const char* bad : {"-oProxyCommand=touch${IFS}/tmp/x", "host;rm", "$(reboot)", "`id`", "a|b", "a&b", "h'x",
                          "h\"x", "a\\b", "..", "user@host", "h:1", "h\tx", "h\x01"}) {
    EXPECT_FALSE(valid_host_name(bad)) << bad;
    const std::string text = std::string(bad) + " slots=1\n";
    EXPECT_THROW(parse_hostfile(text), UsageError) << bad;
  }
  EXPECT_FALSE(valid_host_name(""));
  EXPECT_FALSE(valid_host_name(std::string(254, 'a')));
  for (const char* good : {"localhost", "worker-0", "node_1.cluster.example", "10.0.0.1", "A1"}) {
    EXPECT_TRUE(valid_host_name(good)) << good;
  }
}

const std::vector<HostEntry> kHosts{{"worker-0", 4}, {"worker-1", 4}, {"worker-2", 2}};

TEST(Hostfile, IncludeSelectsHostsAndSlots) {
  const auto s = select_slots(kHosts, "worker-0@worker-1:0,2", "");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].host, "worker-0");
  EXPECT_EQ(s[0].slots, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(s[1].slots, (std::vector<int>{0, 2}));
}

TEST(Hostfile, ExcludeRemovesHostsOrSlots) {
  const auto s = select_slots(kHosts, "", "worker-1@worker-0:1");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].slots, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(s[1].host, "worker-2");
}

TEST(Hostfile, NodeAndSlotLimits) {
  const auto s = select_slots(kHosts, "", "", /*num_nodes=*/2, /*slots_per_node=*/3);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].slots, (std::vector<int>{0, 1, 2}));
}

TEST(Hostfile, FilterErrors) {
  EXPECT_NE(error_of([] { select_slots(kHosts, "worker-0", "worker-1"); }).find("mutually exclusive"),
            std::string::npos);
  EXPECT_NE(error_of([] { select_slots(kHosts, "worker-9", ""); }).find("'worker-9' is not in the hostfile"),
            std::string::npos);
  EXPECT_NE(error_of([] { select_slots(kHosts, "worker-2:5", ""); }).find("no slot 5"), std::string::npos);
  EXPECT_NE(error_of([] { select_slots(kHosts, "worker-0:", ""); }).find("lists no slots"), std::string::npos);
  EXPECT_NE(error_of([] { select_slots(kHosts, "$(id)", ""); }).find("bad host"), std::string::npos);
  EXPECT_NE(error_of([] { select_slots({{"a", 1}}, "", "a"); }).find("left no slots"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::launch::hostfile_test
