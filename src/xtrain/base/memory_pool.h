// The CPU memory pool: a caching allocator installed as LibTorch's CPU allocator. Freed blocks are
// kept in size-class bins (64-byte steps up to 4 KiB, then 4 classes per doubling) and handed back
// for the next request of the same class, so a training step's temporaries stop paying page faults
// (≈ 12 µs per 4 KiB page on our VMs, reference/platform.md). Design choice: one process-wide pool,
// because c10's allocator registry is process-wide; each block carries its own deleter, so tensors
// allocated before install (or after uninstall) are freed by the allocator that made them.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "xtrain/base/options.h"

namespace xtrain::memory_pool {

struct Stats {
  int64_t bytes_in_use = 0;         // handed out and not yet freed (size-class bytes)
  int64_t bytes_cached = 0;         // freed and kept for reuse
  int64_t peak_bytes_in_use = 0;    // since install or reset_peak()
  int64_t peak_bytes_reserved = 0;  // in use + cached
  int64_t allocations = 0;          // requests served by the pool
  int64_t cache_hits = 0;           // ... from a cached block
  int64_t os_allocations = 0;       // ... with new memory from the OS (the misses)
  int64_t os_bytes = 0;             // bytes of those, cumulative
  int64_t os_releases = 0;          // blocks given back (over the cap, release_cached, disabled cache)
  int64_t faults_avoided = 0;       // 4 KiB pages of mmap-sized cache hits a fresh block would fault
  // os_allocations by size: [i] counts blocks of [2^i, 2^(i+1)) bytes. Lets a test ask "was any
  // parameter-sized block newly allocated after step 2?" without a hook in the allocator.
  std::array<int64_t, 48> os_allocations_by_log2{};
  int64_t os_allocations_at_least(int64_t bytes) const;
};

// Installs the pool as c10's CPU allocator (options.enabled) or restores the allocator that was
// there before (enabled = false). Idempotent; call before training (c10::SetAllocator is not
// thread-safe against concurrent allocation). Changing the options of an installed pool applies
// the new cap at once.
void install(const base::MemoryPoolOptions& options);
bool installed();
base::MemoryPoolOptions options();

Stats stats();
void reset_peak();
// Gives every cached block back to the OS; returns the bytes released.
int64_t release_cached();
// "pool: 12.0 MB in use, 40.0 MB cached, peak 50.0 MB; 98% hits, 10240 page faults avoided".
std::string describe(const Stats& s);

// The size class a request of `bytes` is served from (exposed for tests): ≥ bytes, a multiple
// of 64, at most 25% larger above 4 KiB.
int64_t size_class_bytes(int64_t bytes);

}  // namespace xtrain::memory_pool
