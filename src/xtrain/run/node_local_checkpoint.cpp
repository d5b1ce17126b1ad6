// Node-local checkpoints: the node commits on save and the gather on resume; see node_local_checkpoint.h.
#include "xtrain/run/node_local_checkpoint.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/checkpoint/node_parts.h"
#include "xtrain/comm/communicator.h"

namespace xtrain {
namespace fs = std::filesystem;
namespace {

// Every rank's value, in rank order.
std::vector<int64_t> all_gather_int(comm::Communicator& c, int64_t value) {
  at::Tensor all = at::empty({c.size()}, at::kLong);
  c.all_gather(at::full({1}, value, at::kLong), all);
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + c.size());
}

std::string ranks_text(const std::vector<int64_t>& ranks) {
  if (ranks.size() == 1) return c10::str("rank ", ranks.front());
  return c10::str("ranks ", ranks.front(), "-", ranks.back());
}

// The manifest's record of the node parts: node 0's lists every node's ranks.
std::string node_extra(const NodeMap& m, int node) {
  nlohmann::json j;
  j["node_local"] = {{"node", node}, {"nodes", m.ranks.size()}, {"ranks", m.ranks[node]}};
  if (node == 0) j["node_local"]["ranks_by_node"] = m.ranks;
  return j.dump();
}

}  // namespace

bool node_local_storage(const NodeLocalRun& s) {
  return s.config.checkpoint.use_node_local_storage && s.rank.local_world_size < s.rank.world_size;
}

NodeMap node_map(const NodeLocalRun& s) {
  const auto local = all_gather_int(s.comm, s.rank.local_rank);
  NodeMap m;
  for (size_t r = 0; r < local.size(); ++r) {
    if (local[r] == 0 || m.ranks.empty()) m.ranks.emplace_back();
    m.ranks.back().push_back(static_cast<int64_t>(r));
    if (static_cast<int>(r) == s.rank.rank) m.node = static_cast<int>(m.ranks.size()) - 1;
  }
  return m;
}

void commit_node_local(const NodeLocalRun& s, checkpoint::CheckpointWriter& writer, const std::string& root) {
  const NodeMap m = node_map(s);
  s.comm.barrier();  // every rank's files are written
  if (s.rank.local_rank == 0 && m.node != 0) {
    writer.commit_ranks(node_extra(m, m.node), m.ranks[m.node]);
    checkpoint::prune(root, s.config.trainer.keep_checkpoints);
  }
  s.comm.barrier();  // every other node's part is committed: node 0's commit makes the checkpoint the run's
  if (s.lead()) {
    writer.commit_ranks(node_extra(m, 0), m.ranks[0]);
    checkpoint::prune(root, s.config.trainer.keep_checkpoints);
  }
}

void commit_checkpoint(const NodeLocalRun& s, checkpoint::CheckpointWriter& writer, const std::string& root) {
  if (node_local_storage(s)) {
    commit_node_local(s, writer, root);
    return;
  }
  s.comm.barrier();  // every rank's files are written
  if (s.lead()) {
    writer.commit("{}", s.rank.world_size);
    checkpoint::prune(root, s.config.trainer.keep_checkpoints);
  }
}

namespace {

// Each node's local rank 0 opens its part of `tag` (checksums verified); the first node without a
// usable part is an error on every rank, naming the node, its ranks and its path.
void check_parts(const NodeLocalRun& s, const NodeMap& m, const std::string& root, const std::string& tag) {
  std::string problem;
  if (s.rank.local_rank == 0) {
    try {
      checkpoint::CheckpointReader part(root, tag);
    } catch (const UsageError& e) {
      problem = e.what();
    }
  }
  const auto bad = all_gather_int(s.comm, problem.empty() ? 0 : 1);
  for (size_t n = 0; n < m.ranks.size(); ++n) {
    const int first = static_cast<int>(m.ranks[n].front());
    if (!bad[first]) continue;
    const std::string where = comm::broadcast_string(s.comm, root + "/" + tag, first);
    const std::string why = comm::broadcast_string(s.comm, problem, first);
    XTRAIN_USAGE_ERROR("resume: checkpoint ", tag, " (checkpoint.use_node_local_storage): node ", n, " (",
                       ranks_text(m.ranks[n]), ") has no usable part at ", where, ": ", why,
                       "; each node keeps its ranks' parts under its own --output: start every node with the "
                       "--output it saved to");
  }
}

// Node n's files (names, kinds, bytes) from its local rank 0 to every rank; each node's local rank
// 0 writes them into its gathered copy.
void send_part(const NodeLocalRun& s, const NodeMap& m, size_t n, const std::string& root, const std::string& tag,
               checkpoint::CheckpointWriter* out) {
  const int first = static_cast<int>(m.ranks[n].front());
  std::optional<checkpoint::CheckpointReader> part;
  nlohmann::json list = nlohmann::json::array();
  if (s.rank.rank == first) {
    part.emplace(root, tag);
    for (const auto& f : part->files()) list.push_back({f, part->kind(f)});
  }
  list = nlohmann::json::parse(comm::broadcast_string(s.comm, list.dump(), first));
  for (const auto& f : list) {
    const std::string name = f[0], kind = f[1];
    const std::string bytes = comm::broadcast_string(s.comm, part ? part->read_text(name) : std::string(), first);
    if (out) out->write_bytes(name, bytes, kind);
  }
}

}  // namespace

std::string gather_node_local(const NodeLocalRun& s, const std::string& root) {
  const std::string latest = s.lead() ? checkpoint::latest_tag(root) : std::string();
  const std::string tag = comm::broadcast_string(s.comm, latest, 0);
  XTRAIN_USAGE_CHECK(!tag.empty(), "--resume: node 0's ", root, " has no checkpoint (checkpoints/latest is missing)");
  const NodeMap m = node_map(s);
  check_parts(s, m, root, tag);
  const std::string extra = comm::broadcast_string(s.comm, s.lead() ? checkpoint::CheckpointReader(root, tag).extra_json() : "", 0);
  const auto saved = nlohmann::json::parse(extra, nullptr, false);
  const int64_t saved_nodes = saved.is_object() && saved.contains("node_local") ? saved["node_local"].value("nodes", int64_t{1}) : 1;
  XTRAIN_USAGE_CHECK(saved_nodes == static_cast<int64_t>(m.ranks.size()), "resume: checkpoint ", tag, " was saved by ",
                     saved_nodes, " nodes with checkpoint.use_node_local_storage and this run has ", m.ranks.size(),
                     ": the other nodes' parts are on their disks (an elastic restart after losing a node needs a "
                     "shared --output); gather them with `xtrain ckpt consolidate ... --node ...`");
  const std::string gathered = root + "/.gathered";
  std::optional<checkpoint::CheckpointWriter> out;
  if (s.rank.local_rank == 0) {
    fs::remove_all(gathered);
    out.emplace(gathered, tag, 0);
  }
  for (size_t n = 0; n < m.ranks.size(); ++n) send_part(s, m, n, root, tag, out ? &*out : nullptr);
  if (out) out->commit_ranks(checkpoint::gathered_extra(extra), {0});
  s.comm.barrier();
  if (s.lead()) log::info("resume: gathered checkpoint ", tag, " from ", m.ranks.size(), " nodes' local storage");
  return gathered;
}

void remove_gathered(const NodeLocalRun& s, const std::string& gathered_root) {
  s.comm.barrier();
  if (s.rank.local_rank == 0) fs::remove_all(gathered_root);
}

}  // namespace xtrain
