// While an instance lives, LibTorch CPU allocations of at least `min_bytes` are backed by unlinked
// files under `dir` (MAP_SHARED mappings), not by anonymous memory: a model constructed whole on
// every rank before ZeRO stage 3 partitions it (the role of DeepSpeed's zero.Init) then sits in the
// page cache, which the kernel writes back to disk under memory pressure, instead of needing
// 4 bytes per parameter of RAM on every rank. Smaller requests go to the allocator that was
// installed. A block's deleter unmaps it, which frees its file. One instance at a time; create and
// destroy it on one thread while no other thread allocates (c10's allocator registry is global).
#pragma once
#include <cstdint>
#include <string>

namespace c10 {
struct Allocator;
}

namespace xtrain::zero {

// Bytes of file-backed blocks alive now (made under any instance, not yet freed): disk space that
// partitioning the model will give back, which the NVMe space checks may count as available.
int64_t disk_backed_live_bytes();
// What partitioning will give back on this node's disk: disk_backed_live_bytes() times
// LOCAL_WORLD_SIZE, since every local rank builds the same model under the same nvme_path at the
// same time (ranks reserving their state files one after another otherwise see the others'
// construction blocks as used).
int64_t disk_backed_bytes_freed_on_node();

// An nvme_path must be a writable folder. A missing one is created, as DeepSpeed's swappers do
// (os.makedirs), with a warning naming the path and `key` ("zero_optimization.offload_param.nvme_path"):
// a mistyped path would otherwise put the offloaded state on another disk without a word. One that
// cannot be created, is a file or is not writable is a UsageError naming both.
void require_nvme_folder(const std::string& path, const std::string& key);
// The same checks without creating anything (`xtrain config`): a missing folder passes when the
// nearest existing folder above it is writable.
void check_nvme_folder(const std::string& path, const std::string& key);

class DiskBackedAllocations {
 public:
  explicit DiskBackedAllocations(const std::string& dir, int64_t min_bytes = int64_t{1} << 20);
  ~DiskBackedAllocations();  // restores the previous allocator; blocks already handed out stay valid
  DiskBackedAllocations(const DiskBackedAllocations&) = delete;
  DiskBackedAllocations& operator=(const DiskBackedAllocations&) = delete;

  int64_t blocks() const;  // file-backed blocks handed out so far
  int64_t bytes() const;

  struct Impl;

 private:
  Impl* impl_;
  c10::Allocator* previous_ = nullptr;
};

}  // namespace xtrain::zero
