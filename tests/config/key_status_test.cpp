// "Nothing silently ignored": every key of docs/config.md (the visit's key list) has a status, and
// each status keeps its promise: an honoured key names a test in this binary, a refused key set to
// another value than its default fails with "not supported yet: <key>", a no-effect key set so gets
// its start-up line. The DeepSpeed keys read only to be reported are refused or announced.
#include <gtest/gtest.h>

#include <set>

#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/config/key_status.h"
#include "xtrain/config/rules.h"

namespace xtrain::config::key_status_test {
namespace {

std::set<std::string> test_names() {
  std::set<std::string> names;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      // Value-parameterised tests are "Prefix/Suite.Name/param"; a status may name one instance.
      names.insert(std::string(suite->name()) + "." + suite->GetTestInfo(j)->name());
    }
  }
  return names;
}

// A value of the key's type other than its default.
Json other_value(const KeyRow& r) {
  const Json& d = r.default_value;
  if (!r.choices.empty()) {
    for (const auto& c : r.choices) {
      if (!c.empty() && Json(c) != d) return c;
    }
  }
  if (r.type == "bool") return d.is_boolean() ? !d.get<bool>() : true;
  if (r.type == "int") {
    const int64_t v = d.is_number() ? d.get<int64_t>() : 0;
    return v > (int64_t{1} << 40) ? int64_t{1000} : v + 2;
  }
  if (r.type == "float") return d.is_number() && d.get<double>() != 0 ? d.get<double>() / 2 : 1.0;
  if (r.type == "string") return d.is_string() ? d.get<std::string>() + "x" : std::string("x");
  return Json::array({1});
}

// {"a": {"params": {"k": v}, "type": "Lamb"}} from "a.params (Lamb).k": the variant names the type.
Json file_setting(const KeyRow& r, const Json& value) {
  Json root = Json::object();
  Json* node = &root;
  std::string rest = r.key;
  while (true) {
    const auto dot = rest.find('.');
    std::string part = rest.substr(0, dot);
    const auto paren = part.find(" (");
    if (paren != std::string::npos) {
      const std::string variant = part.substr(paren + 2, part.find_first_of(",)", paren) - paren - 2);
      (*node)["type"] = variant;
      if (variant == "OneCycle") (*node)["params"] = Json{{"cycle_min_lr", 0.001}, {"cycle_max_lr", 0.01}};
      part = part.substr(0, paren);
    }
    if (dot == std::string::npos) {
      (*node)[part] = value;
      return root;
    }
    node = &(*node)[part];
    rest = rest.substr(dot + 1);
  }
}

TEST(KeyStatus, EveryKeyHasExactlyOneStatusAndEveryStatusAKey) {
  std::set<std::string> keys;
  for (const auto& r : key_rows()) {
    keys.insert(r.key);
    const KeyStatus* s = find_key_status(r.key);
    ASSERT_NE(s, nullptr) << r.key << " has no status in src/xtrain/config/key_status.cpp";
    EXPECT_EQ(std::string(s->key), r.key);
    if (s->state == KeyState::no_effect) {
      EXPECT_GT(std::string(s->detail).size(), 10u) << r.key << ": say why";
    }
  }
  std::set<std::string> listed;
  for (const auto& s : key_statuses()) {
    EXPECT_TRUE(listed.insert(s.key).second) << s.key << " is listed twice";
    EXPECT_TRUE(keys.count(s.key)) << s.key << " is not a key of docs/config.md (renamed or removed?)";
  }
}

TEST(KeyStatus, HonouredKeysNameATestOfThisBinary) {
  const auto names = test_names();
  for (const auto& s : key_statuses()) {
    if (s.state != KeyState::honoured) continue;
    EXPECT_TRUE(names.count(s.detail)) << s.key << " names the test " << s.detail << ", which does not exist";
  }
}

TEST(KeyStatus, RefusedKeysFailByNameAndNoEffectKeysSayWhy) {
  int refused = 0, no_effect = 0;
  for (const auto& r : key_rows()) {
    const KeyStatus* s = find_key_status(r.key);
    if (!s || s->state == KeyState::honoured || r.alias) continue;
    auto setting = file_setting(r, other_value(r));
    // DeepSpeed reads the fp16 block's keys only when fp16 is on (deepspeed_rules_test covers off).
    if (file_key(r.key).rfind("fp16.", 0) == 0 && setting["fp16"].is_object()) setting["fp16"]["enabled"] = true;
    const std::string text = setting.dump();
    std::string error, lines;
    try {
      const auto loaded = load_text(text, LoadOptions{});
      for (const auto& w : loaded.warnings) lines += w + "\n";
    } catch (const UsageError& e) {
      error = e.what();
    }
    if (s->state == KeyState::refused) {
      ++refused;
      EXPECT_NE(error.find("not supported yet: " + file_key(r.key)), std::string::npos) << text << "\n" << error;
    } else {
      ++no_effect;
      EXPECT_EQ(error, "") << text;
      EXPECT_NE(lines.find(no_effect_line(*s)), std::string::npos) << text << "\n" << lines;
    }
    // The default itself changes nothing, so it is accepted without a line.
    const auto quiet = load_text(file_setting(r, r.default_value).dump(), LoadOptions{});
    for (const auto& w : quiet.warnings) EXPECT_EQ(w.find(file_key(r.key)), std::string::npos) << w;
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(no_effect, 0);
}

TEST(KeyStatus, RecognisedDeepSpeedKeysAreRefusedOrAnnounced) {
  for (const auto& k : recognised_keys()) {
    const std::string when = k.refuse_when;
    const Json on = when == "enabled" ? Json{{"enabled", true}} : when == "!=1" ? Json(2) : Json::object();
    const Json off = when == "enabled" ? Json{{"enabled", false}} : when == "!=1" ? Json(1) : Json::object();
    std::string error;
    try {
      load_text(Json{{k.key, on}}.dump(), LoadOptions{});
    } catch (const UsageError& e) {
      error = e.what();
    }
    if (when.empty()) {
      EXPECT_EQ(error, "") << k.key;
    } else {
      EXPECT_NE(error.find(std::string("not supported yet: ") + k.key), std::string::npos) << k.key << ": " << error;
    }
    if (when == "present") continue;
    const auto loaded = load_text(Json{{k.key, off}}.dump(), LoadOptions{});
    ASSERT_EQ(loaded.warnings.size(), 1u) << k.key;
    EXPECT_NE(loaded.warnings[0].find(std::string(k.key) + " has no effect here: "), std::string::npos)
        << loaded.warnings[0];
  }
}

TEST(KeyStatus, DocsShowEachStatus) {
  const std::string md = markdown_reference();
  EXPECT_NE(md.find("| `zero_optimization.stage` | int | `0` |"), std::string::npos);
  for (const auto& s : key_statuses()) {
    const std::string row = "| `" + std::string(s.key) + "` |";
    const auto at = md.find(row);
    ASSERT_NE(at, std::string::npos) << s.key;
    const std::string line = md.substr(at, md.find('\n', at) - at);
    const char* shown = s.state == KeyState::honoured ? "| honoured |"
                        : s.state == KeyState::refused ? "refused: not supported yet"
                                                       : "no effect here: ";
    EXPECT_NE(line.find(shown), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace xtrain::config::key_status_test
