// A process-wide name -> entry table, the shape every xtrain registry shares (optimizers,
// schedules, losses, models, datasets): built-ins are added on first use by a callback given at
// construction (no static registration objects, which a static library's linker would drop);
// add() replaces an entry of the same name; find() turns an unknown name into a UsageError that
// names the config key, the closest registered name and the list. Entries are never destroyed
// while the process runs, so a reference from find() stays valid even after a replacement.
// Reference: kernels/attention/registry.h (the first registry), LLVM's cl::opt "did you mean".
#pragma once
#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain {

template <typename Entry>
class Registry {
 public:
  // kind: what an entry is, for messages ("optimizer", "model"). builtins: called once, on first
  // use, with this registry; it calls add() for each built-in entry.
  Registry(std::string kind, std::function<void(Registry&)> builtins)
      : kind_(std::move(kind)), builtins_(std::move(builtins)) {}

  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds `name`, replacing an entry of that name (the replaced one stays alive: see the header).
  void add(const std::string& name, Entry entry) {
    XTRAIN_USAGE_CHECK(!name.empty(), kind_, " registry: an entry needs a name");
    ensure_builtins();
    auto e = std::make_shared<const Entry>(std::move(entry));
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      order_.push_back(name);
      entries_.emplace(name, std::move(e));
    } else {
      retired_.push_back(std::move(it->second));
      it->second = std::move(e);
    }
  }

  // Takes `name` out (it stays alive: see the header); false when unknown. For tests and plugins
  // that register an entry for a while.
  bool remove(const std::string& name) {
    ensure_builtins();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return false;
    retired_.push_back(std::move(it->second));
    entries_.erase(it);
    order_.erase(std::find(order_.begin(), order_.end(), name));
    return true;
  }

  bool contains(const std::string& name) { return lookup(name) != nullptr; }

  // nullptr when unknown: for callers that word their own error.
  const Entry* lookup(const std::string& name) {
    ensure_builtins();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : it->second.get();
  }

  // The entry, or a UsageError:
  // config: <key_path>: unknown <kind> "x"; did you mean "y"? registered: a, b, c
  const Entry& find(const std::string& name, const std::string& key_path) {
    if (const Entry* e = lookup(name)) return *e;
    throw UsageError(unknown_message(name, key_path));
  }

  std::string unknown_message(const std::string& name, const std::string& key_path) {
    std::vector<std::string> all = names();
    std::string msg = "config: " + key_path + ": unknown " + kind_ + " \"" + name + "\"";
    if (auto close = closest_match(name, all)) msg += "; did you mean \"" + *close + "\"?";
    msg += " registered: " + join(all);
    return msg;
  }

  // find(), then the entry's optional validate(options) (an Entry with a `validate` member).
  template <class Options>
  const Entry& find_validated(const std::string& name, const std::string& key_path, const Options& options) {
    const Entry& e = find(name, key_path);
    if (e.validate) e.validate(options);
    return e;
  }

  // Every registered name, in the order first added.
  std::vector<std::string> names() {
    ensure_builtins();
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }

  const std::string& kind() const { return kind_; }

  static std::string join(const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
    return s;
  }

 private:
  void ensure_builtins() {
    if (ready_.load(std::memory_order_acquire)) return;
    // Recursive: the callback's own add() calls come back here on this thread and return at once;
    // another thread waits until the built-ins are in.
    std::lock_guard<std::recursive_mutex> lock(init_mutex_);
    if (ready_.load(std::memory_order_relaxed) || initializing_) return;
    initializing_ = true;
    try {
      if (builtins_) builtins_(*this);
    } catch (...) {
      initializing_ = false;
      throw;
    }
    initializing_ = false;
    ready_.store(true, std::memory_order_release);
  }

  std::string kind_;
  std::function<void(Registry&)> builtins_;
  std::atomic<bool> ready_{false};
  std::recursive_mutex init_mutex_;
  bool initializing_ = false;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Entry>> entries_;
  std::vector<std::string> order_;
  std::vector<std::shared_ptr<const Entry>> retired_;
};

// The shape the model and dataset registries share: entries that serve a task ("lm" | "classify"),
// made by one factory, with a description and the keys they read ({key, doc}).
// `call`: "models: register_model"; `factory`: the factory's name in the messages ("build").
inline void check_task_entry(const std::string& call, const std::string& name, bool has_factory,
                             const std::string& factory, const std::string& task) {
  XTRAIN_USAGE_CHECK(has_factory, call, "(\"", name, "\") needs ", factory, " function");
  XTRAIN_USAGE_CHECK(task == "lm" || task == "classify", call, "(\"", name, "\"): task must be \"lm\" or \"classify\", got \"",
                     task, "\"");
}

// docs/config.md's table of such entries: | `name` | task | description | keys read (`<prefix>`) |.
template <typename Entry>
std::string task_entries_table(Registry<Entry>& registry, const std::vector<std::string>& names,
                               const std::string& key_path, const std::string& prefix) {
  std::string md = "| name | task | description | keys read (`" + prefix + "`) |\n|---|---|---|---|\n";
  for (const auto& name : names) {
    const Entry& e = registry.find(name, key_path);
    std::string keys;
    for (const auto& k : e.keys) keys += (keys.empty() ? "`" : ", `") + k.key + "`" + (k.doc.empty() ? "" : " (" + k.doc + ")");
    md += "| `" + name + "` | " + e.task + " | " + e.description + " | " + keys + " |\n";
  }
  return md;
}

}  // namespace xtrain
