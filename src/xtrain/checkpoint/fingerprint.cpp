// fingerprint(): one SHA-256 over every tensor of a checkpoint, independent of how the tensors are
// split into files and of the manifest's tag or sequence number: "same weights?" for tests, for
// resharding round trips and for `xtrain ckpt fingerprint`.
#include <algorithm>

#include "xtrain/base/error.h"
#include "xtrain/base/sha256.h"
#include "xtrain/checkpoint/durable_file.h"
#include "xtrain/checkpoint/layout.h"
#include "xtrain/checkpoint/manifest.h"
#include "xtrain/checkpoint/node_parts.h"
#include "xtrain/checkpoint/store.h"

namespace xtrain::checkpoint {
namespace {

void hash_u64(Sha256& h, uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = uint8_t(v >> (8 * i));
  h.update(le, 8);
}

void hash_string(Sha256& h, const std::string& s) {
  hash_u64(h, s.size());  // length-prefixed: no two (name, dtype) sequences share a byte stream
  h.update(s);
}

}  // namespace

std::string fingerprint(const std::string& path) {
  const auto [root, tag] = resolve_path(path);
  const CheckpointReader reader(root, tag);  // verifies every checksum first
  const auto part = node_part_info(reader);
  XTRAIN_USAGE_CHECK(!part || part->nodes == 1, "checkpoint ", reader.dir(), " is node ", part ? part->node : 0,
                     "'s part of ", part ? part->nodes : 0, " (checkpoint.use_node_local_storage): give every ",
                     "node's folder (xtrain ckpt fingerprint NODE0_DIR --node NODE1_DIR ...)");
  const std::string manifest_path = reader.dir() + "/" + kManifestName;
  const Manifest manifest = Manifest::parse(read_file(manifest_path), manifest_path);
  std::vector<std::pair<std::string, at::Tensor>> all;
  for (const auto& [file, entry] : manifest.files) {
    if (entry.kind != "tensors") continue;
    for (auto& named : reader.read_tensors(file)) all.push_back(std::move(named));
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Sha256 h;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& [name, t] = all[i];
    XTRAIN_USAGE_CHECK(i == 0 || all[i - 1].first != name, "checkpoint ", reader.dir(), ": tensor '", name,
                       "' appears in two files, so the fingerprint would be ambiguous");
    const at::Tensor c = t.contiguous();
    hash_string(h, name);
    hash_string(h, c10::toString(c.scalar_type()));
    hash_u64(h, uint64_t(c.dim()));
    for (int64_t d : c.sizes()) hash_u64(h, uint64_t(d));
    hash_u64(h, uint64_t(c.nbytes()));
    h.update(c.data_ptr(), c.nbytes());
  }
  return h.finish_hex();
}

}  // namespace xtrain::checkpoint
