// The cases of a multi-scale attention fixture (tests/reference/gen_ms_attention*.py): each case
// "<name>/meta" (an int64 vector whose layout the generator defines) with "<name>/q", k, v, dout and
// the expected out, dq, dk, dv. Shared by the 1-D and 2-D tests, which read their own meta fields.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "kernels/attention/attention_checks.h"
#include "support/fixtures.h"

namespace xtrain::testing {

struct MsFixtureCase {
  std::string name;
  at::Tensor meta;
  at::Tensor q, k, v, dout;
  AttentionResult expected;
  int64_t meta_at(int64_t j) const { return meta[j].item<int64_t>(); }
  // meta[from:] as a list (the windows, last in both generators' layouts).
  std::vector<int64_t> meta_from(int64_t from) const {
    std::vector<int64_t> out;
    for (int64_t j = from; j < meta.numel(); ++j) out.push_back(meta_at(j));
    return out;
  }
};

inline std::vector<MsFixtureCase> load_ms_fixture_cases(const std::string& file) {
  const auto fx = load_tensors(file);
  std::vector<MsFixtureCase> cases;
  for (const auto& kv : fx) {
    const auto slash = kv.first.find("/meta");
    if (slash == std::string::npos) continue;
    MsFixtureCase c;
    c.name = kv.first.substr(0, slash);
    c.meta = kv.second;
    const auto get = [&](const std::string& key) { return fx.at(c.name + "/" + key); };
    c.q = get("q");
    c.k = get("k");
    c.v = get("v");
    c.dout = get("dout");
    c.expected = {get("out"), get("dq"), get("dk"), get("dv")};
    cases.push_back(c);
  }
  return cases;
}

}  // namespace xtrain::testing
