#include "xtrain/plan/inputs.h"

#include <cstdlib>
#include <map>
#include <utility>

#include "xtrain/base/error.h"

namespace xtrain::plan {
namespace {

struct Preset {
  int64_t layers, d_model, heads, vocab, seq_len;
};

const std::map<std::string, Preset>& presets() {
  static const std::map<std::string, Preset> kPresets{
      {"default", {4, 256, 4, 256, 256}},          {"gpt2-small", {12, 768, 12, 50257, 1024}},
      {"gpt2-medium", {24, 1024, 16, 50257, 1024}}, {"gpt2-large", {36, 1280, 20, 50257, 1024}},
      {"gpt2-xl", {48, 1600, 25, 50257, 1024}},     {"7b", {32, 4096, 32, 32000, 2048}},
      {"13b", {40, 5120, 40, 32000, 2048}},
  };
  return kPresets;
}

// "<number><unit>" -> (number, unit); UsageError when no number leads.
std::pair<double, std::string> split(const std::string& text, const std::string& option, const char* forms) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || v < 0) XTRAIN_USAGE_ERROR("plan: ", option, " ", text, ": expected a number >= 0 with a unit, e.g. ", forms);
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  return {v, unit};
}

double scaled(const std::string& text, const std::string& option, const char* forms,
              const std::map<std::string, double>& units, bool bare_ok) {
  const auto [v, unit] = split(text, option, forms);
  if (unit.empty() && (bare_ok || v == 0)) return v;
  const auto it = units.find(unit);
  if (it == units.end()) {
    XTRAIN_USAGE_ERROR("plan: ", option, " ", text, ": ", unit.empty() ? "no unit" : "unknown unit '" + unit + "'",
                       "; write it as ", forms);
  }
  return v * it->second;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, p] : presets()) names.push_back(name);
  return names;
}

std::vector<std::string> preset_overrides(const std::string& name) {
  const auto it = presets().find(name);
  if (it == presets().end()) {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    XTRAIN_USAGE_ERROR("plan: unknown --model ", name, "; presets: ", known,
                       " (or give the shape with --config / --set xtrain.model.layers=...)");
  }
  const Preset& p = it->second;
  return {"xtrain.model.type=gpt", "xtrain.model.layers=" + std::to_string(p.layers),
          "xtrain.model.d_model=" + std::to_string(p.d_model), "xtrain.model.heads=" + std::to_string(p.heads),
          "xtrain.model.vocab=" + std::to_string(p.vocab), "xtrain.model.seq_len=" + std::to_string(p.seq_len)};
}

double parse_bandwidth(const std::string& text, const std::string& option) {
  static const std::map<std::string, double> kUnits{
      {"TB/s", 1e12},     {"GB/s", 1e9},      {"MB/s", 1e6},      {"GiB/s", 1073741824.0}, {"MiB/s", 1048576.0},
      {"Tbit/s", 1.25e11}, {"Gbit/s", 1.25e8}, {"Mbit/s", 1.25e5}, {"Tbps", 1.25e11},       {"Gbps", 1.25e8},
      {"Mbps", 1.25e5},   {"tbit", 1.25e11},  {"gbit", 1.25e8},   {"mbit", 1.25e5}};
  return scaled(text, option, "900GB/s (bytes) or 400Gbit/s, 10gbit (bits)", kUnits, false);
}

double parse_bytes(const std::string& text, const std::string& option) {
  static const std::map<std::string, double> kUnits{{"TB", 1e12},          {"GB", 1e9},          {"MB", 1e6},
                                                    {"TiB", 1099511627776.0}, {"GiB", 1073741824.0},
                                                    {"MiB", 1048576.0}};
  return scaled(text, option, "80GB or 24GiB", kUnits, false);
}

double parse_seconds(const std::string& text, const std::string& option) {
  static const std::map<std::string, double> kUnits{{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  return scaled(text, option, "5us, 0.2ms or 1e-5s", kUnits, false);
}

double parse_flops(const std::string& text, const std::string& option) {
  std::map<std::string, double> units;
  for (const auto& [prefix, mult] : std::map<std::string, double>{{"G", 1e9}, {"T", 1e12}, {"P", 1e15}}) {
    for (const char* tail : {"", "FLOPs", "FLOP/s", "flops"}) units[prefix + tail] = mult;
  }
  const double v = scaled(text, option, "312T, 312TFLOPs or 3.12e14 (FLOP/s)", units, true);
  if (v <= 0) XTRAIN_USAGE_ERROR("plan: ", option, " must be > 0, got ", text);
  return v;
}

}  // namespace xtrain::plan
