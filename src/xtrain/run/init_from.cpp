// init_from.h: the source read into named tensors, then matched against the model's own names.
#include "xtrain/run/init_from.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/StringUtil.h>

#include <filesystem>
#include <map>
#include <set>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/checkpoint/model_parallel.h"
#include "xtrain/checkpoint/safetensors.h"
#include "xtrain/models/hf_gpt2.h"
#include "xtrain/run/checkpoint_merge.h"

namespace xtrain {
namespace {
namespace fs = std::filesystem;

constexpr const char* kKey = "xtrain.model.init_from";

std::string shape_of(const at::Tensor& t) { return c10::str("[", c10::Join(", ", t.sizes()), "]"); }

// "a [2, 3], b [4]" — at most 8 names, then how many more.
std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 8) out += c10::str(" and ", names.size() - 8, " more");
  return out;
}

checkpoint::NamedTensors read_run_dir(const fs::path& dir) {
  XTRAIN_USAGE_CHECK(fs::is_directory(dir / "checkpoints"), kKey, ": ", dir.string(),
                     " is a folder but not a run directory (it has no "
                     "checkpoints/): give a run directory or a "
                     ".safetensors file");
  const checkpoint::CheckpointReader reader((dir / "checkpoints").string());
  auto tensors = merge_checkpoint(reader, /*with_optimizer=*/false).model;
  const auto rank0 = checkpoint::model_parallel_rank0(reader);
  if (rank0.has_file("buffers.pt")) {
    for (auto& item : rank0.read_tensors("buffers.pt")) tensors.push_back(std::move(item));
  }
  return tensors;
}

// The source tensor for a model tensor, or an error string when it cannot fill it.
std::string fit(const std::string& name, const at::Tensor& target, at::Tensor& src) {
  if (name == "wpe.weight" && src.dim() == 2 && target.dim() == 2 && src.size(1) == target.size(1) &&
      src.size(0) > target.size(0)) {
    log::info("init_from: wpe.weight has ", src.size(0), " positions; the first ", target.size(0),
              " (xtrain.model.seq_len) are used");
    src = src.narrow(0, 0, target.size(0));
  }
  if (src.sizes() != target.sizes()) {
    return c10::str("tensor '", name, "' is ", shape_of(src), " in the source but the model expects ",
                    shape_of(target));
  }
  if (target.is_floating_point() && !src.is_floating_point()) {
    return c10::str("tensor '", name, "' is ", src.scalar_type(), " in the source but the model's is ",
                    target.scalar_type(), " (a floating-point tensor)");
  }
  return "";
}

}  // namespace

checkpoint::NamedTensors read_init_source(const std::string& path) {
  XTRAIN_USAGE_CHECK(!path.empty(), kKey, " is empty");
  const fs::path p(path);
  XTRAIN_USAGE_CHECK(fs::exists(p), kKey, ": ", path, " does not exist (give a .safetensors file or a run directory)");
  if (fs::is_directory(p)) return read_run_dir(p);
  XTRAIN_USAGE_CHECK(p.extension() == ".safetensors", kKey, ": ", path,
                     " is neither a .safetensors file nor a run directory");
  auto tensors = checkpoint::read_safetensors(path).tensors;
  if (!models::is_hf_gpt2_layout(tensors)) return tensors;
  log::info("init_from: ", path,
            " is in the Hugging Face GPT-2 layout (transformer.h.N...): names "
            "mapped, Conv1D "
            "weights transposed");
  return models::from_hf_gpt2(tensors);
}

InitReport load_init_weights(torch::nn::Module& model, const checkpoint::NamedTensors& source, bool strict,
                             const std::string& what) {
  std::map<std::string, at::Tensor> by_name;
  for (const auto& [name, t] : source) {
    XTRAIN_USAGE_CHECK(by_name.emplace(name, t).second, kKey, ": ", what, " holds tensor '", name, "' twice");
  }
  InitReport r;
  r.source = what;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  std::vector<std::string> bad;
  std::set<std::string> used;
  auto visit = [&](const std::string& name, const at::Tensor& target) {
    auto it = by_name.find(name);
    if (it == by_name.end()) return r.fresh.push_back(name + " " + shape_of(target));
    used.insert(name);
    at::Tensor src = it->second;
    const std::string error = fit(name, target, src);
    if (!error.empty()) return bad.push_back(error);
    copies.emplace_back(target, src);
    r.loaded.push_back(name);
  };
  for (const auto& item : model.named_parameters(true)) visit(item.key(), item.value());
  for (const auto& item : model.named_buffers(true)) visit(item.key(), item.value());
  for (const auto& [name, t] : source) {
    if (!used.count(name)) r.ignored.push_back(name + " " + shape_of(t));
  }
  XTRAIN_USAGE_CHECK(bad.empty(), kKey, ": ", what, ": ", c10::Join("; ", bad));
  XTRAIN_USAGE_CHECK(!strict || r.fresh.empty(), kKey, ": ", what, " has no tensor for ", r.fresh.size(),
                     " of the model's: ", name_list(r.fresh),
                     " (set xtrain.model.init_strict false to leave them at "
                     "their fresh init)");
  XTRAIN_USAGE_CHECK(!strict || r.ignored.empty(), kKey, ": ", what, " has ", r.ignored.size(),
                     " tensors the model does not: ", name_list(r.ignored),
                     " (a different model? set xtrain.model.init_strict false "
                     "to ignore them)");
  XTRAIN_USAGE_CHECK(!r.loaded.empty(), kKey, ": no tensor of ", what,
                     " matches a model tensor by name: is it this model's file?");
  at::NoGradGuard no_grad;
  for (auto& [target, src] : copies) target.copy_(src);
  return r;
}

InitReport init_model_from(torch::nn::Module& model, const std::string& path, bool strict) {
  const auto r = load_init_weights(model, read_init_source(path), strict, path);
  log::info("init_from: ", r.loaded.size(), " tensors loaded from ", path);
  if (!r.fresh.empty()) log::info("init_from: left at their fresh init: ", c10::Join(", ", r.fresh));
  if (!r.ignored.empty()) log::info("init_from: not in the model, ignored: ", c10::Join(", ", r.ignored));
  return r;
}

}  // namespace xtrain
