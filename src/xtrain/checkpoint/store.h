// Checkpoints on disk: <root>/<tag>/ holds manifest.json plus files of named tensors and text.
// Writing goes to <root>/.tmp-<tag>/, every file is fsynced, the manifest (with a SHA-256 per
// file) is written last, the folder is renamed into place and <root>/latest is replaced
// atomically — a crash at any point leaves the previous checkpoint and `latest` intact. Reading
// verifies every checksum and names the corrupted file (and the previous tag to fall back to).
// This area moves named tensors and text; it knows nothing of optimizers or models.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace xtrain::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class CheckpointWriter {
 public:
  // Several ranks may write into the same tag: each constructs a writer, writes its own files
  // (distinct names), calls finish_rank(); after a barrier rank 0 calls commit().
  CheckpointWriter(std::string root, std::string tag, int64_t rank = 0);
  void write_tensors(const std::string& file, const NamedTensors& tensors);
  void write_text(const std::string& file, const std::string& text);
  // fsyncs this rank's files and records their checksums for commit().
  void finish_rank();
  // Rank 0, after every rank's finish_rank(): manifest (files, sizes, SHA-256, `extra` JSON object
  // text), fsync, rename into place, update `latest`, delete leftover .tmp-* folders (so every rank
  // must be done with this checkpoint before any rank starts the next one). `world_size` > 0
  // checks that ranks 0..world_size-1 all finished and ignores records of other ranks (left by a
  // crashed attempt at the same tag with more ranks); 0 takes every record present.
  // Committing a tag that exists replaces it.
  void commit(const std::string& extra_json = "{}", int64_t world_size = 0);
  // A commit of the files of `ranks` only (every record when empty), by any one of them: with
  // checkpoint.use_node_local_storage each node's local rank 0 commits its node's part under that
  // node's own root. Otherwise as commit().
  void commit_ranks(const std::string& extra_json, const std::vector<int64_t>& ranks);
  // A file written as given (copied from another checkpoint): `kind` "tensors" or "text".
  void write_bytes(const std::string& file, const std::string& bytes, const std::string& kind);
  const std::string& tag() const { return tag_; }
  // Prefixes every later file name (model-parallel ranks sharing a tag: "mp_rank_01_") and, when
  // given, every later tensor name (ranks that write the same tensors into one tag keep the names
  // unique, as fingerprint() needs: "local_sgd_rank_1/").
  void set_scope(std::string file_prefix, std::string tensor_prefix = "") {
    scope_ = std::move(file_prefix);
    tensor_scope_ = std::move(tensor_prefix);
  }
  std::pair<std::string, std::string> scope() const { return {scope_, tensor_scope_}; }

 private:
  std::string root_, tag_, tmp_dir_, scope_, tensor_scope_;
  int64_t rank_;
  struct Record {
    std::string file, sha256, kind;  // kind: "tensors" | "text"
    int64_t bytes = 0;
  };
  std::vector<Record> records_;  // this rank's files, in writing order
  bool finished_ = false, committed_ = false;
};

class CheckpointReader {
 public:
  // tag "" reads <root>/latest. Verifies every file's checksum first; a mismatch or a missing
  // file is a UsageError naming the file and offering the previous tag. Tensors come back on the
  // CPU, in the order they were written.
  explicit CheckpointReader(std::string root, std::string tag = "");
  NamedTensors read_tensors(const std::string& file) const;
  std::string read_text(const std::string& file) const;
  bool has_file(const std::string& file) const;
  std::vector<std::string> files() const;
  const std::string& tag() const { return tag_; }
  const std::string& dir() const { return dir_; }
  std::string extra_json() const;  // the `extra` object given to commit()
  std::string kind(const std::string& file) const;  // "tensors" | "text"
  // A reader of the files written under CheckpointWriter::set_scope(prefix, tensor_prefix), by their
  // unprefixed file names (files() lists only those) and tensor names.
  CheckpointReader scoped(const std::string& prefix, const std::string& tensor_prefix = "") const;

 private:
  std::string root_, tag_, dir_;
  std::string manifest_;
  std::string scope_, tensor_scope_;
};

// Tags under root, oldest first (by the order they were committed).
std::vector<std::string> list_tags(const std::string& root);
// The tag `latest` names, or "" when there is none.
std::string latest_tag(const std::string& root);
// Deletes all but the newest `keep` tags (keep 0: delete none); never the tag `latest` names.
void prune(const std::string& root, int64_t keep);
// One SHA-256 hex digest over every tensor of a checkpoint (all files), in sorted name order:
// name, dtype, shape and bytes. `path` is a checkpoint tag folder, a checkpoints root (latest), or
// a run directory (its checkpoints/latest).
std::string fingerprint(const std::string& path);

}  // namespace xtrain::checkpoint
