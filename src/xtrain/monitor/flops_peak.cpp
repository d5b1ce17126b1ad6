// The MFU peak (flops.h): best of several GEMM shapes and repetitions, cached per machine in a JSON
// file keyed by CPU, cores, threads, dtype, GEMM and library versions. Design choice: the peak is
// the best rate ever seen for a key, so noise can only lower a measurement, never the cached value
// below what this machine has shown it reaches. Reference: nanoGPT's estimate_mfu (a fixed peak).
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <dlfcn.h>
#include <nlohmann/json.hpp>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <utility>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "xtrain/base/log.h"
#include "xtrain/monitor/flops.h"

namespace xtrain::monitor {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    return colon == std::string::npos ? line : line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "unknown cpu";
}

// The BLAS library this process loaded: OpenBLAS reports its version and the kernel it picked
// (OPENBLAS_CORETYPE changes that kernel, and the peak with it); otherwise the file sgemm_ is in.
std::string blas_library() {
  if (auto config = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) return config();
  Dl_info info{};
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  if (sgemm != nullptr && dladdr(sgemm, &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    const auto real = fs::canonical(info.dli_fname, ec);
    return ec ? std::string(info.dli_fname) : real.string();
  }
  return "no BLAS";
}

std::string versions() {
  return "torch " TORCH_VERSION "; " + at::get_mkldnn_version() + "; " + blas_library();
}

// Best FLOP/s of c = a·b over `batches` batches of calls, each at least 20 ms (CPU) or 20 calls.
double best_rate(const GemmFn& run, c10::Device device, c10::ScalarType dtype, int64_t M, int64_t K, int64_t N,
                 int batches) {
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  // Constant inputs: GEMM time does not depend on the values, and random ones would draw from the
  // global generator and shift every later random number (dropout) of the run.
  const at::Tensor a = at::full({M, K}, 0.5, options), b = at::full({K, N}, 0.25, options);
  const at::Tensor c = at::empty({M, N}, options);  // one output: no page faults in the timing
  auto sync = [&] {
    if (device.is_cuda()) (void)c.sum().item<double>();
  };
  run(c, a, b);  // warm-up: thread pools, oneDNN primitive cache, CUDA context
  sync();
  const double flops = 2.0 * static_cast<double>(M) * K * N;
  double best = 0;
  for (int batch = 0; batch < batches; ++batch) {
    int calls = 0;
    const auto start = Clock::now();
    double s = 0;
    do {
      run(c, a, b);
      ++calls;
      if (device.is_cuda() && calls < 20) continue;
      sync();
      s = std::chrono::duration<double>(Clock::now() - start).count();
    } while (s < 0.02 && calls < 1000);
    best = std::max(best, flops * calls / s);
  }
  return best;
}

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json read_cache(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nlohmann::json::object();
  try {
    auto j = nlohmann::json::parse(f);
    if (j.is_object() && j.value("version", 0) == 1 && j.contains("entries") && j["entries"].is_object()) return j;
  } catch (const nlohmann::json::exception&) {
  }
  log::warn("monitor: ignoring unreadable peak cache ", path, " (it is rewritten on the next store)");
  return nlohmann::json::object();
}

GemmFn or_matmul(const GemmFn& gemm) {
  return gemm ? gemm : GemmFn([](const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
    auto out = c;
    at::matmul_out(out, a, b);
  });
}

}  // namespace

std::string PeakKey::str() const {
  return "cpu=" + cpu + "|cores=" + std::to_string(cores) + "|threads=" + std::to_string(threads) + "|dtype=" + dtype +
         "|gemm=" + gemm + "|" + versions;
}

PeakKey peak_key(c10::Device device, c10::ScalarType dtype, const std::string& gemm_name) {
  PeakKey k;
  k.cpu = device.is_cpu() ? cpu_model() : device.str();
  k.cores = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  k.threads = at::get_num_threads();
  k.dtype = dtype == at::kBFloat16 ? "bf16" : dtype == at::kHalf ? "fp16" : "fp32";
  k.gemm = gemm_name;
  k.versions = versions();
  return k;
}

double measure_gemm_shape(c10::Device device, c10::ScalarType dtype, const GemmFn& gemm, const std::string& shape,
                          int batches) {
  long long M = 0, K = 0, N = 0;
  char x1 = 0, x2 = 0;
  std::istringstream in(shape);
  if (!(in >> M >> x1 >> K >> x2 >> N) || x1 != 'x' || x2 != 'x' || M <= 0 || K <= 0 || N <= 0 || M * K > (1LL << 26) ||
      K * N > (1LL << 26)) {
    M = K = N = 1024;  // not a shape this code wrote: a plain square
  }
  return best_rate(or_matmul(gemm), device, dtype, M, K, N, batches);
}

GemmPeak measure_gemm_peak(c10::Device device, c10::ScalarType dtype, const GemmFn& gemm) {
  const GemmFn run = or_matmul(gemm);
  // Square problems and the rectangles of transformer layers (tokens x C -> 3C, 4C, and back),
  // whose operands can stay in cache and run faster than a large square.
  using Shape = std::array<int64_t, 3>;  // M, K, N
  const std::vector<Shape> shapes = device.is_cuda()
                                        ? std::vector<Shape>{{4096, 4096, 4096}, {8192, 8192, 8192}}
                                        : std::vector<Shape>{{512, 512, 512},   {1024, 1024, 1024}, {2048, 2048, 2048},
                                                             {2048, 256, 768},  {2048, 256, 1024},  {2048, 1024, 256},
                                                             {1024, 768, 2304}, {1024, 3072, 768}};
  GemmPeak best;
  for (const auto& [M, K, N] : shapes) {
    const double r = best_rate(run, device, dtype, M, K, N, 5);
    if (r > best.flops) {
      best.flops = r;
      best.shape = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
    }
  }
  return best;
}

std::string default_peak_cache_path() {
  using Place = std::pair<const char*, const char*>;  // variable, folder under it
  for (const Place& p : std::array<Place, 3>{{{"XTRAIN_CACHE_DIR", ""}, {"XDG_CACHE_HOME", "/xtrain"},
                                              {"HOME", "/.cache/xtrain"}}}) {
    const std::string dir = env(p.first);
    if (!dir.empty()) return dir + p.second + "/peak_flops.json";
  }
  return "";
}

CachedPeak PeakCache::entry(const PeakKey& key) const {
  CachedPeak c;
  if (path_.empty()) return c;
  const auto j = read_cache(path_);
  if (!j.contains("entries")) return c;
  const auto it = j["entries"].find(key.str());
  if (it == j["entries"].end() || !it->is_object()) return c;
  try {
    c.flops = it->value("flops", 0.0);
    c.source = it->value("source", "");
    c.shape = it->value("shape", "");
  } catch (const nlohmann::json::exception&) {
    c = CachedPeak{};  // a field of the wrong type: as if absent
  }
  return c;
}

void PeakCache::store(const PeakKey& key, double flops, const std::string& source, const std::string& detail,
                      const std::string& shape) const {
  if (path_.empty()) return;
  const CachedPeak old = entry(key);
  if (old.flops >= flops) return;  // the best rate seen stays (ranks measuring at once, each slowed by the others)
  auto j = read_cache(path_);
  j["version"] = 1;
  j["entries"][key.str()] = {{"flops", flops},
                             {"source", source},
                             {"detail", detail},
                             {"shape", shape.empty() ? old.shape : shape},
                             {"when", utc_now()},
                             {"key",
                              {{"cpu", key.cpu},
                               {"cores", key.cores},
                               {"threads", key.threads},
                               {"dtype", key.dtype},
                               {"gemm", key.gemm},
                               {"versions", key.versions}}}};
  std::error_code ec;
  const fs::path path(path_);
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  const std::string tmp = path_ + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    f << j.dump(2) << "\n";
    if (!f) {
      log::warn("monitor: cannot write the peak cache ", tmp, "; the peak is measured again next run");
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    log::warn("monitor: cannot replace the peak cache ", path_, ": ", ec.message());
    fs::remove(tmp, ec);
  }
}

ResolvedPeak resolve_peak(const PeakKey& key, const PeakCache& cache, const std::function<GemmPeak()>& measure,
                          const std::function<double(const std::string& shape)>& probe) {
  constexpr double kProbeMargin = 1.05;  // best-of-3 noise above a best-of-5 measurement
  ResolvedPeak r;
  const CachedPeak cached = cache.entry(key);
  double now = 0;
  if (cached.flops > 0) {
    now = probe ? probe(cached.shape) : 0.0;
    if (now <= kProbeMargin * cached.flops) {
      r.flops = cached.flops;
      r.detail = "cached in " + cache.path() + (now > 0 ? "; a check at " + cached.shape + " now: " + si(now) + "FLOP/s" : "");
      return r;
    }
  }
  const GemmPeak p = measure();
  r.flops = std::max(p.flops, now);
  r.measured = true;
  r.detail = "best at " + p.shape;
  if (cached.flops > 0) {
    r.detail += "; again, as a check ran at " + si(now) + "FLOP/s, above the cached " + si(cached.flops) + "FLOP/s";
  }
  cache.store(key, r.flops, "gemm", p.shape, p.shape);
  return r;
}

}  // namespace xtrain::monitor
