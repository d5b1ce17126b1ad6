// Tag names, the scan of committed tags, list_tags / latest_tag / prune.
#include "xtrain/checkpoint/layout.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/checkpoint/durable_file.h"
#include "xtrain/checkpoint/manifest.h"
#include "xtrain/checkpoint/store.h"

namespace xtrain::checkpoint {
namespace fs = std::filesystem;

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void check_tag(const std::string& tag) {
  XTRAIN_USAGE_CHECK(!tag.empty() && tag.find('/') == std::string::npos && tag[0] != '.' && tag != kLatestName,
                     "checkpoint: tag '", tag, "' cannot be a folder name (no '/', no leading '.', not 'latest')");
}

void check_file_name(const std::string& file) {
  TORCH_CHECK(!file.empty() && file.find('/') == std::string::npos && file[0] != '.' && file != kManifestName,
              "checkpoint: file name '", file, "' is reserved or not a plain name");
}

std::vector<TagInfo> scan_tags(const std::string& root) {
  std::vector<TagInfo> tags;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string manifest = entry.path().string() + "/" + kManifestName;
    if (name.empty() || name[0] == '.' || !is_directory(entry.path().string())) continue;
    struct stat st {};
    if (::stat(manifest.c_str(), &st) != 0) continue;
    TagInfo info{name, 0, int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    try {
      info.seq = Manifest::parse(read_file(manifest), manifest).seq;
    } catch (const UsageError& e) {
      log::warn("checkpoint: ignoring ", entry.path().string(), ": ", e.what());
      continue;
    }
    tags.push_back(info);
  }
  std::sort(tags.begin(), tags.end(), [](const TagInfo& a, const TagInfo& b) {
    if (a.seq != b.seq) return a.seq < b.seq;
    if (a.mtime_ns != b.mtime_ns) return a.mtime_ns < b.mtime_ns;
    return a.tag < b.tag;
  });
  return tags;
}

std::string fallback_hint(const std::string& root, const std::string& bad_tag) {
  std::string previous;
  for (const TagInfo& t : scan_tags(root)) {
    if (t.tag == bad_tag) break;  // tags committed after the bad one are not "previous"
    previous = t.tag;
  }
  if (previous.empty()) return "there is no earlier checkpoint to fall back to";
  return c10::str("the previous checkpoint is ", previous, " (--resume loads `latest`; point latest at ", previous,
                  " or delete the bad one)");
}

std::vector<std::string> list_tags(const std::string& root) {
  std::vector<std::string> out;
  for (const TagInfo& t : scan_tags(root)) out.push_back(t.tag);
  return out;
}

std::string latest_tag(const std::string& root) {
  const std::string path = root + "/" + kLatestName;
  if (!is_regular_file(path)) return "";
  std::string tag = read_file(path);
  // DeepSpeed writes no newline; tolerate one (and spaces) from a hand edit.
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
  return tag;
}

void prune(const std::string& root, int64_t keep) {
  XTRAIN_USAGE_CHECK(keep >= 0, "checkpoint: the number of checkpoints to keep must be >= 0, got ", keep);
  if (keep == 0) return;
  const std::vector<std::string> tags = list_tags(root);
  const std::string latest = latest_tag(root);
  const int64_t excess = int64_t(tags.size()) - keep;
  for (int64_t i = 0; i < excess; ++i) {
    if (tags[i] == latest) continue;  // `latest` may have been pointed back at an old tag by hand
    std::error_code ec;
    fs::remove_all(root + "/" + tags[i], ec);
    if (ec) log::warn("checkpoint: could not delete ", root, "/", tags[i], ": ", ec.message());
  }
}

}  // namespace xtrain::checkpoint
