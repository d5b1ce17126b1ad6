// `xtrain.memory_pool` (ours; DeepSpeed has no CPU allocator keys): the caching CPU allocator of
// base/memory_pool.h. A plain struct at layer 0 so config/ can read it like every area's options.
#pragma once
#include <cstdint>

namespace xtrain::base {

struct MemoryPoolOptions {
  bool enabled = true;         // install the pool as LibTorch's CPU allocator
  // freed bytes kept for reuse; -1: $XTRAIN_MEMORY_POOL_CACHE_MB, else a quarter of physical memory /
  // LOCAL_WORLD_SIZE; 0: none
  int64_t max_cached_mb = -1;
  bool huge_pages = true;      // madvise(MADV_HUGEPAGE) on blocks of 2 MiB and more
  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "xtrain: caching CPU allocator (keeps freed blocks; no page faults on reuse)");
    v("max_cached_mb", max_cached_mb, "cap on freed memory kept for reuse (-1: a quarter of RAM divided among the node's ranks; 0: keep none)");
    v("huge_pages", huge_pages, "back blocks of 2 MiB and more with transparent huge pages");
  }
};

}  // namespace xtrain::base
