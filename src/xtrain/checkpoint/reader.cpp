// CheckpointReader: resolves the tag (`latest` by default), then checks every file named by the
// manifest — present, same size, same SHA-256 — before anything is returned, so a resume never
// starts from a silently damaged checkpoint.
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/durable_file.h"
#include "xtrain/checkpoint/layout.h"
#include "xtrain/checkpoint/manifest.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/checkpoint/tensor_file.h"

namespace xtrain::checkpoint {
namespace {

std::string joined_tags(const std::string& root) {
  std::string out;
  for (const std::string& t : list_tags(root)) out += (out.empty() ? "" : ", ") + t;
  return out.empty() ? "none" : out;
}

void verify_file(const std::string& root, const std::string& tag, const std::string& dir, const std::string& name,
                 const FileEntry& entry) {
  const std::string path = dir + "/" + name;
  XTRAIN_USAGE_CHECK(is_regular_file(path), "checkpoint ", dir, ": file ", name, " listed in ", kManifestName,
                     " is missing; ", fallback_hint(root, tag));
  const FileDigest d = digest_file(path);
  XTRAIN_USAGE_CHECK(d.bytes == entry.bytes, "checkpoint ", dir, ": file ", name, " is corrupted (", d.bytes,
                     " bytes, ", kManifestName, " says ", entry.bytes, "); ", fallback_hint(root, tag));
  XTRAIN_USAGE_CHECK(d.sha256 == entry.sha256, "checkpoint ", dir, ": file ", name,
                     " is corrupted (sha256 mismatch); ", fallback_hint(root, tag));
}

}  // namespace

CheckpointReader::CheckpointReader(std::string root, std::string tag) : root_(std::move(root)), tag_(std::move(tag)) {
  const bool from_latest = tag_.empty();
  if (from_latest) {
    tag_ = latest_tag(root_);
    XTRAIN_USAGE_CHECK(!tag_.empty(), "checkpoint ", root_, ": nothing to load (no `latest` file; committed tags: ",
                       joined_tags(root_), ")");
  }
  dir_ = root_ + "/" + tag_;
  XTRAIN_USAGE_CHECK(is_directory(dir_), "checkpoint ", root_, ": tag ", tag_, " not found",
                     from_latest ? " (named by `latest`)" : "", "; committed tags: ", joined_tags(root_));
  const std::string manifest_path = dir_ + "/" + kManifestName;
  XTRAIN_USAGE_CHECK(is_regular_file(manifest_path), "checkpoint ", dir_, ": ", kManifestName,
                     " is missing (not a checkpoint, or an incomplete copy); ", fallback_hint(root_, tag_));
  manifest_ = read_file(manifest_path);
  const Manifest m = Manifest::parse(manifest_, manifest_path);
  for (const auto& [name, entry] : m.files) verify_file(root_, tag_, dir_, name, entry);
}

NamedTensors CheckpointReader::read_tensors(const std::string& file) const {
  const std::string name = scope_ + file;
  const Manifest m = Manifest::parse(manifest_, dir_ + "/" + kManifestName);
  auto it = m.files.find(name);
  XTRAIN_USAGE_CHECK(it != m.files.end(), "checkpoint ", dir_, " has no file ", name);
  TORCH_CHECK(it->second.kind == "tensors", "checkpoint ", dir_, ": ", name, " is a ", it->second.kind, " file");
  auto tensors = read_tensor_file(dir_ + "/" + name);
  for (auto& [n, t] : tensors) {
    if (!tensor_scope_.empty() && n.compare(0, tensor_scope_.size(), tensor_scope_) == 0) n = n.substr(tensor_scope_.size());
  }
  return tensors;
}

std::string CheckpointReader::read_text(const std::string& file) const {
  XTRAIN_USAGE_CHECK(has_file(file), "checkpoint ", dir_, " has no file ", scope_ + file);
  return read_file(dir_ + "/" + scope_ + file);
}

bool CheckpointReader::has_file(const std::string& file) const {
  return Manifest::parse(manifest_, dir_ + "/" + kManifestName).files.count(scope_ + file) > 0;
}

std::vector<std::string> CheckpointReader::files() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : Manifest::parse(manifest_, dir_ + "/" + kManifestName).files) {
    if (name.compare(0, scope_.size(), scope_) == 0) out.push_back(name.substr(scope_.size()));
  }
  return out;
}

CheckpointReader CheckpointReader::scoped(const std::string& prefix, const std::string& tensor_prefix) const {
  CheckpointReader out = *this;
  out.scope_ = scope_ + prefix;
  out.tensor_scope_ = tensor_scope_ + tensor_prefix;
  return out;
}

std::string CheckpointReader::kind(const std::string& file) const {
  const auto files = Manifest::parse(manifest_, dir_ + "/" + kManifestName).files;
  auto it = files.find(scope_ + file);
  XTRAIN_USAGE_CHECK(it != files.end(), "checkpoint ", dir_, " has no file ", scope_ + file);
  return it->second.kind;
}

std::string CheckpointReader::extra_json() const {
  return Manifest::parse(manifest_, dir_ + "/" + kManifestName).extra_json;
}

}  // namespace xtrain::checkpoint
