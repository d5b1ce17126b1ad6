// The caching CPU allocator (memory_pool.h). Each block has a 64-byte header in front of the data
// (so the DataPtr's context is the data pointer and c10's raw allocate/deallocate work); blocks of
// 256 KiB and more are our own mmaps, 2 MiB-aligned and advised MADV_HUGEPAGE when they span a huge
// page, smaller ones come from posix_memalign. One mutex guards the bins: a training step makes a
// few thousand allocations, and the OS calls (the slow part) run outside it.
#include "xtrain/base/memory_pool.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace xtrain::memory_pool {

namespace {

constexpr size_t kAlignment = 64;     // c10's gAlignment: the same vector-loop peeling as the default
constexpr size_t kHeaderBytes = 64;   // one cache line in front of the data, keeps it 64-aligned
constexpr size_t kSmallMax = 4096;    // up to here, classes are 64-byte steps
constexpr int kSmallBins = 64;
constexpr int kNumBins = kSmallBins + 4 * 52;  // 4 classes per doubling up to 2^64
constexpr size_t kMmapMin = 256 << 10;        // from here, our own page-aligned mappings
constexpr size_t kPage = 4096;
constexpr size_t kHugePage = 2 << 20;
constexpr uint64_t kMagic = 0x31506e6961727478ULL;  // "xtrainP1"

struct alignas(64) Header {
  uint64_t magic;
  uint64_t bytes;      // class bytes after the header
  uint64_t map_bytes;  // length of our mmap (0: posix_memalign)
  int64_t bin;
};
static_assert(sizeof(Header) == kHeaderBytes, "the header must keep the data 64-byte aligned");

int floor_log2(uint64_t v) { return 63 - __builtin_clzll(v); }

// The bin and the class size of a request of n > 0 bytes.
int bin_of(size_t n, size_t* class_bytes) {
  if (n <= kSmallMax) {
    const size_t k = (n + 63) / 64;
    *class_bytes = k * 64;
    return static_cast<int>(k) - 1;
  }
  const int p = floor_log2(n - 1);  // 2^p < n <= 2^(p+1), p >= 12
  const size_t step = size_t{1} << (p - 2);
  const size_t k = (n - (size_t{1} << p) + step - 1) / step;  // 1..4
  *class_bytes = (size_t{1} << p) + k * step;
  return kSmallBins + (p - 12) * 4 + static_cast<int>(k) - 1;
}

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

// A quarter of physical memory, shared by the ranks of this node (LOCAL_WORLD_SIZE, set by the
// launcher): each process may keep its share of freed blocks. XTRAIN_MEMORY_POOL_CACHE_MB
// overrides it (a model near the memory limit wants little or nothing cached).
int64_t default_cap() {
  if (const char* mb = std::getenv("XTRAIN_MEMORY_POOL_CACHE_MB")) return std::max<int64_t>(0, std::atoll(mb)) << 20;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t ranks = 1;
  if (const char* v = std::getenv("LOCAL_WORLD_SIZE")) ranks = std::max<int64_t>(1, std::atoll(v));
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 4 / ranks : int64_t{1} << 30;
}

Header* map_block(size_t total, bool huge) {
  const size_t align = huge && total >= kHugePage ? kHugePage : kPage;
  const size_t len = round_up(total, kPage);
  const size_t map = len + (align > kPage ? align : 0);
  void* raw = mmap(nullptr, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto lo = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = round_up(lo, align);
  if (start > lo) munmap(raw, start - lo);
  const uintptr_t tail = lo + map - (start + len);
  if (tail > 0) munmap(reinterpret_cast<void*>(start + len), tail);
  if (align == kHugePage) madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
  auto* h = reinterpret_cast<Header*>(start);
  h->map_bytes = len;
  return h;
}

Header* os_allocate(size_t class_bytes, int bin, bool huge) {
  const size_t total = class_bytes + kHeaderBytes;
  Header* h = nullptr;
  if (total >= kMmapMin) {
    h = map_block(total, huge);
  } else {
    void* p = nullptr;
    if (posix_memalign(&p, kAlignment, total) == 0) {
      h = static_cast<Header*>(p);
      h->map_bytes = 0;
    }
  }
  if (h == nullptr) return nullptr;
  h->magic = kMagic;
  h->bytes = class_bytes;
  h->bin = bin;
  return h;
}

void os_free(Header* h) {
  h->magic = 0;
  if (h->map_bytes > 0) {
    munmap(h, h->map_bytes);
  } else {
    std::free(h);
  }
}

class Pool final : public c10::Allocator {
 public:
  Pool() : bins_(kNumBins) {}

  c10::DataPtr allocate(size_t n) const override {
    if (n == 0) return {nullptr, nullptr, &Pool::deleter, c10::Device(c10::DeviceType::CPU)};
    size_t class_bytes = 0;
    const int bin = bin_of(n, &class_bytes);
    Header* h = const_cast<Pool*>(this)->take(bin, class_bytes);
    void* data = reinterpret_cast<char*>(h) + kHeaderBytes;
    return {data, data, &Pool::deleter, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Pool::deleter; }

  static void deleter(void* data);
  void give_back(Header* h);
  int64_t release_all();
  void configure(const base::MemoryPoolOptions& o);
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
    stats_.peak_bytes_reserved = stats_.bytes_in_use + stats_.bytes_cached;
  }

 private:
  Header* take(int bin, size_t class_bytes);
  void note_in_use(int64_t bytes);  // under mu_

  mutable std::mutex mu_;
  std::vector<std::vector<Header*>> bins_;
  Stats stats_;
  int64_t max_cached_ = 0;
  bool huge_pages_ = true;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: blocks may still be freed during exit
  return *p;
}

void Pool::note_in_use(int64_t bytes) {
  stats_.bytes_in_use += bytes;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_in_use + stats_.bytes_cached);
}

Header* Pool::take(int bin, size_t class_bytes) {
  bool huge = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.allocations;
    auto& free_list = bins_[bin];
    if (!free_list.empty()) {
      Header* h = free_list.back();
      free_list.pop_back();
      stats_.bytes_cached -= static_cast<int64_t>(h->bytes);
      ++stats_.cache_hits;
      if (h->map_bytes > 0) stats_.faults_avoided += static_cast<int64_t>(h->map_bytes / kPage);
      note_in_use(static_cast<int64_t>(h->bytes));
      return h;
    }
    huge = huge_pages_;
  }
  Header* h = os_allocate(class_bytes, bin, huge);
  if (h == nullptr) {  // the cache may hold what the OS cannot give: return it and try once more
    release_all();
    h = os_allocate(class_bytes, bin, huge);
  }
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(h != nullptr, "memory_pool: out of memory allocating ", class_bytes, " bytes (in use ",
              stats_.bytes_in_use, " bytes)");
  ++stats_.os_allocations;
  stats_.os_bytes += static_cast<int64_t>(class_bytes);
  ++stats_.os_allocations_by_log2[std::min<int>(floor_log2(class_bytes), 47)];
  note_in_use(static_cast<int64_t>(class_bytes));
  return h;
}

void Pool::deleter(void* data) {
  if (data == nullptr) return;
  auto* h = reinterpret_cast<Header*>(static_cast<char*>(data) - kHeaderBytes);
  TORCH_INTERNAL_ASSERT(h->magic == kMagic, "memory_pool: freeing a block the pool did not allocate");
  pool().give_back(h);
}

void Pool::give_back(Header* h) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto bytes = static_cast<int64_t>(h->bytes);
    stats_.bytes_in_use -= bytes;
    if (stats_.bytes_cached + bytes <= max_cached_) {
      bins_[h->bin].push_back(h);
      stats_.bytes_cached += bytes;
      return;
    }
    ++stats_.os_releases;
  }
  os_free(h);
}

int64_t Pool::release_all() {
  std::vector<Header*> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& free_list : bins_) {
      out.insert(out.end(), free_list.begin(), free_list.end());
      free_list.clear();
    }
    stats_.os_releases += static_cast<int64_t>(out.size());
    stats_.bytes_cached = 0;
  }
  int64_t bytes = 0;
  for (Header* h : out) {
    bytes += static_cast<int64_t>(h->bytes);
    os_free(h);
  }
  return bytes;
}

void Pool::configure(const base::MemoryPoolOptions& o) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    max_cached_ = o.max_cached_mb < 0 ? default_cap() : o.max_cached_mb * (int64_t{1} << 20);
    huge_pages_ = o.huge_pages;
    if (stats_.bytes_cached <= max_cached_) return;
  }
  release_all();  // a lower cap applies at once
}

std::mutex g_install_mu;
std::atomic<bool> g_installed{false};
c10::Allocator* g_previous = nullptr;
base::MemoryPoolOptions g_options;

}  // namespace

int64_t Stats::os_allocations_at_least(int64_t bytes) const {
  int64_t n = 0;
  for (int i = 0; i < static_cast<int>(os_allocations_by_log2.size()); ++i) {
    if ((int64_t{1} << (i + 1)) > bytes) n += os_allocations_by_log2[i];  // buckets that may hold ≥ bytes
  }
  return n;
}

void install(const base::MemoryPoolOptions& options) {
  std::lock_guard<std::mutex> lock(g_install_mu);
  g_options = options;
  pool().configure(options);
  constexpr uint8_t kPriority = 255;  // above c10's default registration (0)
  if (options.enabled && !g_installed) {
    g_previous = c10::GetAllocator(c10::DeviceType::CPU);
    c10::SetAllocator(c10::DeviceType::CPU, &pool(), kPriority);
    g_installed = true;
  } else if (!options.enabled && g_installed) {
    c10::SetAllocator(c10::DeviceType::CPU, g_previous, kPriority);
    g_installed = false;
  }
  TORCH_INTERNAL_ASSERT((c10::GetAllocator(c10::DeviceType::CPU) == &pool()) == g_installed.load(),
                        "memory_pool: c10 did not take the allocator change");
}

bool installed() { return g_installed; }

base::MemoryPoolOptions options() {
  std::lock_guard<std::mutex> lock(g_install_mu);
  return g_options;
}

Stats stats() { return pool().stats(); }
void reset_peak() { pool().reset_peak(); }
int64_t release_cached() { return pool().release_all(); }

int64_t size_class_bytes(int64_t bytes) {
  if (bytes <= 0) return 0;
  size_t class_bytes = 0;
  bin_of(static_cast<size_t>(bytes), &class_bytes);
  return static_cast<int64_t>(class_bytes);
}

std::string describe(const Stats& s) {
  const double mb = 1.0 / (1 << 20);
  const double hits = s.allocations > 0 ? 100.0 * s.cache_hits / s.allocations : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "pool: %.1f MB in use, %.1f MB cached, peak %.1f MB reserved; %.1f%% hits, %lld page faults avoided",
                s.bytes_in_use * mb, s.bytes_cached * mb, s.peak_bytes_reserved * mb, hits,
                static_cast<long long>(s.faults_avoided));
  return buf;
}

}  // namespace xtrain::memory_pool
