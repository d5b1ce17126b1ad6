#include "xtrain/base/plugin.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"

namespace xtrain::plugin {
namespace {
namespace fs = std::filesystem;

struct Loaded {
  std::mutex mutex;
  std::vector<std::string> paths;  // canonical
};

Loaded& state() {
  static Loaded s;  // leaked on purpose: libraries stay open for the whole process
  return s;
}

std::string canonical_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::path p(path);
  XTRAIN_USAGE_CHECK(fs::is_regular_file(p, ec), what, " ", path, ": no such file",
                     (fs::exists(p, ec) ? " (it is not a regular file)" : ""),
                     "; give the path of a shared library built against xtrain::plugin_api (examples/plugin/)");
  const fs::path abs = fs::canonical(p, ec);
  XTRAIN_USAGE_CHECK(!ec, what, " ", path, ": ", ec.message());
  return abs.string();
}

}  // namespace

void load(const std::string& path, const std::string& what) {
  XTRAIN_USAGE_CHECK(!path.empty(), what, ": the path is empty");
  const std::string file = canonical_file(path, what);
  void* handle = nullptr;
  {
    auto& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (const auto& p : s.paths) {
      if (p == file) return;
    }
    ::dlerror();  // clear a stale message
    handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      XTRAIN_USAGE_ERROR(what, " ", path, ": cannot load it: ", why ? why : "unknown dlopen error",
                         " (a plugin must be built against the same LibTorch and xtrain as this program,"
                         " and resolves xtrain's symbols from it)");
    }
    s.paths.push_back(file);
  }
  // Outside the lock: the entry function may itself load a plugin.
  if (void* init = ::dlsym(handle, kInitSymbol)) {
    reinterpret_cast<void (*)()>(init)();
  }
  log::info("plugin: loaded ", file);
}

void load_all(const std::vector<std::string>& paths, const std::string& what) {
  for (const auto& p : paths) load(p, what);
}

std::vector<std::string> loaded() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.paths;
}

}  // namespace xtrain::plugin
