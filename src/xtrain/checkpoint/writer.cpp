// CheckpointWriter: each rank writes into <root>/.tmp-<tag>/ and leaves a record of its files
// (.rank-<r>.json); rank 0's commit() merges the records into manifest.json, renames the folder
// into place and replaces `latest`. Nothing is visible to readers before the rename.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/checkpoint/durable_file.h"
#include "xtrain/checkpoint/layout.h"
#include "xtrain/checkpoint/manifest.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/checkpoint/tensor_file.h"

namespace xtrain::checkpoint {
namespace fs = std::filesystem;
namespace {

std::string rank_record_name(int64_t rank) { return ".rank-" + std::to_string(rank) + ".json"; }

// Rank number of a ".rank-<r>.json" name, or -1.
int64_t parse_rank_record(const std::string& name) {
  long long rank = -1;
  int consumed = 0;
  if (std::sscanf(name.c_str(), ".rank-%lld.json%n", &rank, &consumed) == 1 && size_t(consumed) == name.size()) {
    return rank;
  }
  return -1;
}

// The merged file table of the records of `ranks` (every record present when empty); each of
// those ranks must have finished. Records of other ranks (another node's, or a crashed attempt's
// with more ranks) are ignored.
FileTable collect_records(const std::string& tmp_dir, const std::vector<int64_t>& ranks) {
  const std::set<int64_t> wanted(ranks.begin(), ranks.end());
  std::set<int64_t> seen;
  FileTable files;
  for (const auto& entry : fs::directory_iterator(tmp_dir)) {
    const int64_t rank = parse_rank_record(entry.path().filename().string());
    if (rank < 0 || (!wanted.empty() && wanted.count(rank) == 0)) continue;
    seen.insert(rank);
    const std::string where = entry.path().string();
    for (const auto& [name, e] : file_table_from_json(read_file(where), where)) {
      TORCH_CHECK(files.count(name) == 0, "checkpoint: file '", name, "' was written by two ranks (", tmp_dir, ")");
      struct stat st {};
      const std::string path = tmp_dir + "/" + name;
      TORCH_CHECK(::stat(path.c_str(), &st) == 0 && int64_t(st.st_size) == e.bytes, "checkpoint: ", path,
                  " is missing or changed after rank ", rank, " recorded it");
      files[name] = e;
    }
  }
  for (int64_t r : wanted) {
    TORCH_CHECK(seen.count(r), "checkpoint: rank ", r, " of ", ranks.size(), " did not call finish_rank() before commit() (",
                tmp_dir, ")");
  }
  return files;
}

// Removes everything in the tmp folder that the manifest will not list (rank records, and files
// left by an earlier crashed attempt at the same tag).
void remove_unlisted(const std::string& tmp_dir, const FileTable& files) {
  for (const auto& entry : fs::directory_iterator(tmp_dir)) {
    if (files.count(entry.path().filename().string()) == 0) fs::remove_all(entry.path());
  }
}

int64_t next_seq(const std::string& root) {
  int64_t seq = 0;
  for (const TagInfo& t : scan_tags(root)) seq = std::max(seq, t.seq);
  return seq + 1;
}

// Renames tmp_dir to <root>/<tag>, moving an existing folder of that tag aside first.
void install(const std::string& root, const std::string& tmp_dir, const std::string& tag) {
  const std::string target = root + "/" + tag, old = root + "/" + kTmpPrefix + "replaced-" + tag;
  if (fs::exists(target)) {
    fs::remove_all(old);
    fs::rename(target, old);
  }
  fs::rename(tmp_dir, target);
  fsync_dir(root);
  fs::remove_all(old);
}

void remove_leftovers(const std::string& root) {
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kTmpPrefix, 0) != 0) continue;
    std::error_code ec;
    fs::remove_all(entry.path(), ec);
    if (ec) log::warn("checkpoint: could not delete the leftover ", entry.path().string(), ": ", ec.message());
  }
}

}  // namespace

CheckpointWriter::CheckpointWriter(std::string root, std::string tag, int64_t rank)
    : root_(std::move(root)), tag_(std::move(tag)), rank_(rank) {
  check_tag(tag_);
  TORCH_CHECK(rank >= 0, "checkpoint: rank must be >= 0, got ", rank);
  tmp_dir_ = root_ + "/" + kTmpPrefix + tag_;
  std::error_code ec;
  fs::create_directories(tmp_dir_, ec);
  XTRAIN_USAGE_CHECK(!ec, "checkpoint: cannot create ", tmp_dir_, ": ", ec.message());
}

void CheckpointWriter::write_tensors(const std::string& file, const NamedTensors& tensors) {
  TORCH_CHECK(!finished_ && !committed_, "checkpoint: write_tensors('", file, "') after finish_rank()");
  const std::string name = scope_ + file;
  check_file_name(name);
  for (const Record& r : records_) TORCH_CHECK(r.file != name, "checkpoint: file '", name, "' written twice");
  NamedTensors renamed;
  if (!tensor_scope_.empty()) {
    renamed.reserve(tensors.size());
    for (const auto& [n, t] : tensors) renamed.emplace_back(tensor_scope_ + n, t);
  }
  const FileDigest d = write_tensor_file(tmp_dir_ + "/" + name, tensor_scope_.empty() ? tensors : renamed);
  records_.push_back({name, d.sha256, "tensors", d.bytes});
}

void CheckpointWriter::write_text(const std::string& file, const std::string& text) {
  TORCH_CHECK(!finished_ && !committed_, "checkpoint: write_text('", file, "') after finish_rank()");
  const std::string name = scope_ + file;
  check_file_name(name);
  for (const Record& r : records_) TORCH_CHECK(r.file != name, "checkpoint: file '", name, "' written twice");
  const FileDigest d = write_durable(tmp_dir_ + "/" + name, text);
  records_.push_back({name, d.sha256, "text", d.bytes});
}

void CheckpointWriter::finish_rank() {
  TORCH_CHECK(!finished_, "checkpoint: finish_rank() called twice for tag ", tag_);
  FileTable files;
  for (const Record& r : records_) files[r.file] = FileEntry{r.bytes, r.sha256, r.kind};
  // Every data file was fsynced when written; the record and the folder entries follow.
  write_durable(tmp_dir_ + "/" + rank_record_name(rank_), file_table_to_json(files));
  fsync_dir(tmp_dir_);
  finished_ = true;
}

void CheckpointWriter::write_bytes(const std::string& file, const std::string& bytes, const std::string& kind) {
  TORCH_CHECK(!finished_ && !committed_, "checkpoint: write_bytes('", file, "') after finish_rank()");
  TORCH_CHECK(kind == "tensors" || kind == "text", "checkpoint: unknown file kind '", kind, "' for ", file);
  const std::string name = scope_ + file;
  check_file_name(name);
  for (const Record& r : records_) TORCH_CHECK(r.file != name, "checkpoint: file '", name, "' written twice");
  const FileDigest d = write_durable(tmp_dir_ + "/" + name, bytes);
  records_.push_back({name, d.sha256, kind, d.bytes});
}

void CheckpointWriter::commit(const std::string& extra_json, int64_t world_size) {
  TORCH_CHECK(rank_ == 0, "checkpoint: commit() is rank 0's, called on rank ", rank_);
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < world_size; ++r) ranks.push_back(r);
  commit_ranks(extra_json, ranks);
}

void CheckpointWriter::commit_ranks(const std::string& extra_json, const std::vector<int64_t>& ranks) {
  TORCH_CHECK(!committed_, "checkpoint: tag ", tag_, " committed twice");
  nlohmann::json extra;
  try {
    extra = nlohmann::json::parse(extra_json);
  } catch (const nlohmann::json::exception& e) {
    TORCH_CHECK(false, "checkpoint: commit(extra_json) is not valid JSON: ", e.what());
  }
  TORCH_CHECK(extra.is_object(), "checkpoint: commit(extra_json) must be a JSON object, got ", extra_json);
  if (!finished_) finish_rank();
  try {
    Manifest m;
    m.tag = tag_;
    m.extra_json = extra.dump();
    m.files = collect_records(tmp_dir_, ranks);
    remove_unlisted(tmp_dir_, m.files);
    m.seq = next_seq(root_);
    write_durable(tmp_dir_ + "/" + kManifestName, m.to_json());
    fsync_dir(tmp_dir_);
    install(root_, tmp_dir_, tag_);
    write_file_atomic(root_ + "/" + kLatestName, tag_);
  } catch (const fs::filesystem_error& e) {
    XTRAIN_USAGE_ERROR("checkpoint: committing ", root_, "/", tag_, " failed: ", e.what());
  }
  committed_ = true;
  remove_leftovers(root_);
}

}  // namespace xtrain::checkpoint
