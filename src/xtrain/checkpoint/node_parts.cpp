// gather_node_parts and its checks; see node_parts.h.
#include "xtrain/checkpoint/node_parts.h"

#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/layout.h"
#include "xtrain/checkpoint/manifest.h"

namespace xtrain::checkpoint {
namespace fs = std::filesystem;

std::optional<NodePartInfo> node_part_info(const CheckpointReader& reader) {
  const auto extra = nlohmann::json::parse(reader.extra_json(), nullptr, false);
  if (!extra.is_object() || !extra.contains("node_local")) return std::nullopt;
  const auto& j = extra["node_local"];
  NodePartInfo info;
  info.node = j.value("node", 0);
  info.nodes = j.value("nodes", 1);
  info.ranks = j.value("ranks", std::vector<int64_t>{});
  return info;
}

std::string gathered_extra(const std::string& node0_extra) {
  auto extra = nlohmann::json::parse(node0_extra, nullptr, false);
  if (!extra.is_object()) return "{}";
  if (extra.contains("node_local")) {
    extra["gathered_from_nodes"] = extra["node_local"].value("ranks_by_node", nlohmann::json::array());
    extra.erase("node_local");
  }
  return extra.dump();
}

std::string gather_node_parts(const std::vector<CheckpointReader>& parts, const std::string& out_root) {
  XTRAIN_USAGE_CHECK(!parts.empty(), "checkpoint: no node folders to gather");
  const std::string tag = parts.front().tag();
  std::vector<const CheckpointReader*> by_node;
  for (const auto& p : parts) {
    const auto info = node_part_info(p);
    XTRAIN_USAGE_CHECK(info, "checkpoint ", p.dir(), " is not a node's part (it was not saved with ",
                       "checkpoint.use_node_local_storage on several nodes): give it alone");
    XTRAIN_USAGE_CHECK(p.tag() == tag, "checkpoint: the node folders hold different tags (", tag, " in ",
                       parts.front().dir(), ", ", p.tag(), " in ", p.dir(), "): give one tag's folders");
    if (by_node.empty()) by_node.resize(static_cast<size_t>(info->nodes), nullptr);
    XTRAIN_USAGE_CHECK(info->nodes == static_cast<int>(by_node.size()) && info->node < info->nodes, "checkpoint ",
                       p.dir(), " is node ", info->node, " of ", info->nodes, ", the others of ", by_node.size());
    XTRAIN_USAGE_CHECK(!by_node[info->node], "checkpoint: node ", info->node, "'s part given twice (",
                       by_node[info->node] ? by_node[info->node]->dir() : "", " and ", p.dir(), ")");
    by_node[info->node] = &p;
  }
  std::string missing;
  for (size_t n = 0; n < by_node.size(); ++n) {
    if (!by_node[n]) missing += (missing.empty() ? "" : ", ") + std::to_string(n);
  }
  XTRAIN_USAGE_CHECK(missing.empty(), "checkpoint ", tag, ": node(s) ", missing, " of ", by_node.size(),
                     " missing: give every node's folder (checkpoint.use_node_local_storage keeps each node's ",
                     "ranks' parts under that node's --output)");
  CheckpointWriter out(out_root, tag, 0);
  for (const CheckpointReader* p : by_node) {
    for (const auto& f : p->files()) out.write_bytes(f, p->read_text(f), p->kind(f));
  }
  out.commit(gathered_extra(by_node.front()->extra_json()));
  return out_root + "/" + tag;
}

// (root, tag) of a tag folder, a checkpoints root, or a run directory holding checkpoints/.
std::pair<std::string, std::string> resolve_path(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (is_regular_file(path + "/" + kManifestName)) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return {".", path};
    return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
  }
  for (const std::string& root : {path, path + "/checkpoints"}) {
    if (!latest_tag(root).empty()) return {root, ""};
  }
  XTRAIN_USAGE_ERROR("checkpoint: ", path, " is neither a checkpoint folder (no ", kManifestName,
                     "), a checkpoints root nor a run directory (no latest or checkpoints/latest)");
}

std::string fingerprint_nodes(const std::vector<std::string>& paths) {
  if (paths.size() == 1) return fingerprint(paths.front());
  std::vector<CheckpointReader> parts;
  for (const auto& path : paths) {
    const auto [root, tag] = resolve_path(path);
    parts.emplace_back(root, tag);
  }
  char tmpl[] = "/tmp/xtrain-gather-XXXXXX";
  XTRAIN_USAGE_CHECK(::mkdtemp(tmpl) != nullptr, "checkpoint: cannot make a temporary folder in /tmp");
  const std::string tmp = tmpl;
  try {
    const std::string digest = fingerprint(gather_node_parts(parts, tmp));
    fs::remove_all(tmp);
    return digest;
  } catch (...) {
    fs::remove_all(tmp);
    throw;
  }
}

}  // namespace xtrain::checkpoint
