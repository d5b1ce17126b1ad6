// What `xtrain plan` reads besides a config: named model shapes and quantities with explicit units
// (a bandwidth is "900GB/s" or "400Gbit/s", never a bare number: bits and bytes differ by 8x).
// Every parse error names the option and shows the accepted forms.
#pragma once
#include <string>
#include <vector>

#include "xtrain/plan/cost_model.h"

namespace xtrain::plan {

// gpt2-small/-medium/-large/-xl (Radford et al. 2019; vocab 50257, seq 1024), 7b and 13b (LLaMA's
// layers/width/heads, vocab 32000, seq 2048, with this GPT's 4C MLP), default (configs/default.json).
// The keys are xtrain.model.* overrides, so --set can still change one of them.
std::vector<std::string> preset_overrides(const std::string& name);  // UsageError listing the names
std::vector<std::string> preset_names();

double parse_bandwidth(const std::string& text, const std::string& option);  // bytes/s
double parse_bytes(const std::string& text, const std::string& option);      // "80GB", "24GiB"
double parse_seconds(const std::string& text, const std::string& option);    // "5us", "0.1ms", "0"
double parse_flops(const std::string& text, const std::string& option);      // "312T", "1.5e12", "312TFLOPs"

}  // namespace xtrain::plan
