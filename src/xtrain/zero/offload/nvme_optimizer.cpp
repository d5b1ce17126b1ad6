// The chunk pipeline of NvmeOptimizerState (nvme_optimizer.h). The step of a chunk is the fused
// optimizer's own step with its state tensors re-pointed (Tensor::set_) at the chunk buffer's
// arrays, so the kernel updates the buffer in place, and with its step count set to the shard's
// before every chunk (Adam's bias correction): each element sees exactly the arithmetic of the
// in-memory optimizer over the whole shard.
#include "xtrain/zero/offload/nvme_optimizer.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/base/stopwatch.h"
#include "xtrain/optim/adam8bit.h"
#include "xtrain/optim/cpu/quant8.h"
#include "xtrain/optim/registry.h"
#include "xtrain/zero/offload/disk_backed_allocations.h"
#include "xtrain/zero/offload/uring_file.h"

namespace xtrain::zero {
namespace {

constexpr int64_t kChunkAlign = kIoAlign / 4;  // elements: each fp32 array starts 4096-aligned
constexpr int64_t kSpaceMargin = 64LL << 20;   // bytes left free beyond the state file
constexpr const char* kPathKey = "zero_optimization.offload_optimizer.nvme_path";

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

std::string make_folder(const std::string& nvme_path, int64_t rank) {
  require_nvme_folder(nvme_path, kPathKey);
  const std::string folder = c10::str(nvme_path, "/xtrain_rank", rank, "_", ::getpid());
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  XTRAIN_USAGE_CHECK(!ec, "zero: cannot create the optimizer-state folder ", folder, ": ", ec.message(), " (",
                     kPathKey, " = \"", nvme_path, "\")");
  XTRAIN_USAGE_CHECK(::access(folder.c_str(), W_OK | X_OK) == 0, "zero: the optimizer-state folder ", folder,
                     " is not writable: ", std::strerror(errno), " (", kPathKey, " = \"", nvme_path, "\")");
  return folder;
}

// Returns whether the space is free now (else it is free once the model's file-backed construction
// blocks of this node, disk_backed_bytes_freed_on_node(), are released by partitioning: the file is
// then sparse).
bool check_space(const std::string& folder, const std::string& nvme_path, int64_t state_bytes) {
  int64_t available = 0;
  if (auto fake = env::get_int(kNvmeFakeFreeBytesEnv)) {
    available = *fake;
  } else {
    struct statvfs s {};
    XTRAIN_USAGE_CHECK(::statvfs(folder.c_str(), &s) == 0, "zero: cannot query free space of ", folder, ": ",
                       std::strerror(errno), " (", kPathKey, ")");
    available = static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
  }
  const int64_t needed = state_bytes + kSpaceMargin, freed_later = disk_backed_bytes_freed_on_node();
  XTRAIN_USAGE_CHECK(available + freed_later >= needed, "zero: not enough free space for the optimizer state in ",
                     nvme_path, ": need ", needed, " bytes (", state_bytes, " of state + ", kSpaceMargin,
                     " margin), available ", available,
                     freed_later ? c10::str(" + ", freed_later, " the model's construction will free") : "", " (",
                     kPathKey, ")");
  return available >= needed;
}

std::vector<optim::Segment> cut_segments(const optim::StepInputs& in, int64_t begin, int64_t end) {
  std::vector<optim::Segment> out;
  if (in.segments == nullptr) {
    out.push_back({0, end - begin, 0, 0});
    return out;
  }
  for (const auto& s : *in.segments) {
    const int64_t b = std::max(s.offset, begin), e = std::min(s.offset + s.numel, end);
    if (b < e) out.push_back({b - begin, e - b, s.group, s.param_id});
  }
  return out;
}

}  // namespace

NvmeOptimizerState::NvmeOptimizerState(std::string nvme_path, int64_t rank, int64_t numel,
                                       const optim::OptimizerOptions& optimizer,
                                       const OffloadOptimizerOptions& /*offload*/, const AioOptions& aio,
                                       int64_t sub_group_size)
    : numel_(numel), options_(optimizer) {
  TORCH_INTERNAL_ASSERT(numel >= 0);
  XTRAIN_USAGE_CHECK(sub_group_size > 0, "zero: sub_group_size must be > 0, got ", sub_group_size,
                     " (zero_optimization.sub_group_size)");
  // An optimizer whose step needs more than its chunk (LAMB's per-parameter norm) says so in its entry.
  XTRAIN_USAGE_CHECK(optim::find_optimizer(optimizer.type).nvme_offload, "zero: optimizer ", optimizer.type,
                     " cannot be offloaded to NVMe (zero_optimization.offload_optimizer.device)");
  check_aio_options(aio);
  full_ = optim::make_optimizer(optimizer);
  optimizer_name_ = full_->name();
  full_->init_state(kChunkAlign);  // a probe: is the state kept in quantisation blocks?
  const int64_t align = optim::state_is_blockwise(full_->state(), kChunkAlign)
                            ? std::max(kChunkAlign, optim::cpu::kQuantBlock)
                            : kChunkAlign;
  chunk_ = std::max(align, std::min(round_up(sub_group_size, align), round_up(numel, align)));
  full_->init_state(chunk_);
  if (numel_ % chunk_ != 0) {
    tail_ = optim::make_optimizer(optimizer);
    tail_->init_state(numel_ % chunk_);
  }
  plan_arrays();

  folder_ = make_folder(nvme_path, rank);
  static std::atomic<int64_t> instances{0};  // several states per process (tests, engines) get their own file
  file_path_ = c10::str(folder_, "/optimizer", instances++, ".bin");
  try {
    const bool free_now = check_space(folder_, nvme_path, disk_bytes());
    file_ = std::make_unique<UringFile>(file_path_, aio);
    file_->allocate(disk_bytes(), /*reserve=*/free_now);
  } catch (...) {
    remove_files();
    throw;
  }

  const int64_t nbuf = aio.overlap_events ? std::min<int64_t>(3, std::max<int64_t>(num_chunks(), 1)) : 1;
  for (int64_t b = 0; b < nbuf; ++b) buffers_.push_back(aligned_float_buffer(chunk_bytes() / 4));
  bind_state(*full_, buffers_[0]);  // frees init_state's allocation
  if (tail_) bind_state(*tail_, buffers_[0]);
}

void NvmeOptimizerState::plan_arrays() {
  array_offset_ = {0};
  full_numel_ = {chunk_};
  tail_numel_ = {numel_ % chunk_};
  array_dtype_ = {at::kFloat};
  int64_t offset = round_up(chunk_ * 4, kIoAlign);
  const auto full = full_->state();
  const auto tail = tail_ ? tail_->state() : decltype(full){};
  for (size_t j = 0; j < full.size(); ++j) {
    const at::Tensor& t = full[j].second;
    state_names_.push_back(full[j].first);
    array_offset_.push_back(offset);
    full_numel_.push_back(t.numel());
    tail_numel_.push_back(tail.empty() ? 0 : tail[j].second.numel());
    array_dtype_.push_back(t.scalar_type());
    offset += round_up(t.numel() * static_cast<int64_t>(t.element_size()), kIoAlign);
  }
  array_offset_.push_back(offset);  // the chunk's size
}

// Points the optimizer's state tensors at arrays 1..S of `buf`, each keeping its length and dtype.
void NvmeOptimizerState::bind_state(optim::Optimizer& opt, const at::Tensor& buf) const {
  auto* base = static_cast<char*>(buf.data_ptr());
  size_t j = 1;
  for (auto& [name, t] : opt.state()) t.set_(at::from_blob(base + array_offset_[j++], {t.numel()}, t.options()));
}

int64_t NvmeOptimizerState::array_numel(size_t j, int64_t k) const {
  const bool short_last = k == num_chunks() - 1 && numel_ % chunk_ != 0;
  return short_last ? tail_numel_[j] : full_numel_[j];
}

NvmeOptimizerState::~NvmeOptimizerState() { remove_files(); }

void NvmeOptimizerState::remove_files() noexcept {
  file_.reset();
  std::error_code ec;
  std::filesystem::remove(file_path_, ec);
  std::filesystem::remove(folder_, ec);  // only when empty: other instances of this process may remain
}

bool NvmeOptimizerState::direct_io() const { return file_->direct(); }

int64_t NvmeOptimizerState::buffer_bytes() const {
  return static_cast<int64_t>(buffers_.size()) * round_up(chunk_bytes(), kIoAlign);
}

int64_t NvmeOptimizerState::array_index(const std::string& name) const {
  if (name == "master") return 0;
  for (size_t j = 0; j < state_names_.size(); ++j) {
    if (state_names_[j] == name) return static_cast<int64_t>(j) + 1;
  }
  TORCH_CHECK(false, "zero: no optimizer state named \"", name, "\" (", optimizer_name_, " has ",
              c10::Join(", ", state_names_), ")");
  return -1;
}

void NvmeOptimizerState::initialize(const at::Tensor& master) {
  TORCH_CHECK(master.numel() == numel_, "zero: initialize() needs ", numel_, " elements, got ", master.numel());
  const auto src = master.reshape({-1}).to(at::kFloat);
  auto& buf = buffers_[0];
  for (int64_t k = 0; k < num_chunks(); ++k) {
    buf.zero_();
    buf.narrow(0, 0, chunk_len(k)).copy_(src.narrow(0, k * chunk_, chunk_len(k)));
    file_->write(buf.data_ptr(), chunk_bytes(), k * chunk_bytes());
  }
}

at::Tensor NvmeOptimizerState::read(const std::string& name) const {
  const auto j = static_cast<size_t>(array_index(name));
  int64_t total = 0;
  for (int64_t k = 0; k < num_chunks(); ++k) total += array_numel(j, k);
  auto out = at::empty({total}, at::TensorOptions().dtype(array_dtype_[j]));
  auto* dst = static_cast<char*>(out.data_ptr());
  auto* buf = static_cast<char*>(buffers_[0].data_ptr());
  const int64_t padded = array_offset_[j + 1] - array_offset_[j], size = out.element_size();
  for (int64_t k = 0; k < num_chunks(); ++k) {
    file_->read(buf, padded, k * chunk_bytes() + array_offset_[j]);
    std::memcpy(dst, buf, array_numel(j, k) * size);
    dst += array_numel(j, k) * size;
  }
  return out;
}

void NvmeOptimizerState::write(const std::string& name, const at::Tensor& t) {
  const auto j = static_cast<size_t>(array_index(name));
  int64_t total = 0;
  for (int64_t k = 0; k < num_chunks(); ++k) total += array_numel(j, k);
  TORCH_CHECK(t.numel() == total, "zero: write(\"", name, "\") needs ", total, " elements, got ", t.numel());
  const auto src = t.reshape({-1}).to(array_dtype_[j]).contiguous();
  const auto* from = static_cast<const char*>(src.data_ptr());
  auto* buf = static_cast<char*>(buffers_[0].data_ptr());
  const int64_t padded = array_offset_[j + 1] - array_offset_[j], size = src.element_size();
  for (int64_t k = 0; k < num_chunks(); ++k) {
    std::memset(buf, 0, padded);
    std::memcpy(buf, from, array_numel(j, k) * size);
    from += array_numel(j, k) * size;
    file_->write(buf, padded, k * chunk_bytes() + array_offset_[j]);
  }
}

void NvmeOptimizerState::write_range(const std::string& name, int64_t offset, const at::Tensor& values) {
  const int64_t j = array_index(name), n = values.numel();
  TORCH_CHECK(array_dtype_[j] == at::kFloat, "zero: write_range(\"", name, "\") needs an fp32 array");
  TORCH_CHECK(offset >= 0 && offset + n <= numel_, "zero: write_range(\"", name, "\") of ", n, " elements at ", offset,
              " is outside [0, ", numel_, ")");
  const auto src = values.reshape({-1}).to(at::kFloat).contiguous();
  for (int64_t done = 0; done < n;) {
    const int64_t pos = offset + done, k = pos / chunk_, in_chunk = pos - k * chunk_;
    const int64_t len = std::min(n - done, chunk_ - in_chunk);
    file_->write(src.data_ptr<float>() + done, len * 4, k * chunk_bytes() + array_offset_[j] + in_chunk * 4);
    done += len;
  }
}

void NvmeOptimizerState::step(const optim::StepInputs& in, const at::Tensor& params_out) {
  TORCH_CHECK(params_out.numel() == numel_ && params_out.is_contiguous(), "zero: params_out must be contiguous with ",
              numel_, " elements, got ", params_out.sizes());
  auto flat = params_out.view({-1});
  step(in, [&flat](int64_t offset, const at::Tensor& m) { flat.narrow(0, offset, m.numel()).copy_(m); });
}

// Chunk k lives in buffer k % B. With B = 3 the read of k+1 is queued before chunk k is stepped
// and the write of k after it, so both overlap the step; a buffer is reused once its write is done.
// With B = 1 (aio.overlap_events false, or one chunk) everything runs in order.
void NvmeOptimizerState::step(const optim::StepInputs& in, const ChunkSink& on_chunk) {
  TORCH_CHECK(!in.params.defined() && !in.params_lowp.defined(),
              "zero: NvmeOptimizerState::step takes the master weights from disk; leave params and params_lowp "
              "undefined");
  TORCH_CHECK(in.grads.defined() && in.grads.numel() == numel_ && in.grads.is_contiguous() && in.grads.is_cpu(),
              "zero: grads must be a contiguous CPU tensor of ", numel_, " elements");
  stats_ = IoStats{};
  Stopwatch total;
  const int64_t K = num_chunks(), B = static_cast<int64_t>(buffers_.size());
  std::vector<int64_t> reading(B, 0), writing(B, 0);  // tickets per buffer, 0: none
  auto wait = [&](int64_t& ticket, double& seconds) {
    if (ticket == 0) return;
    Stopwatch w;
    file_->wait(ticket);
    ticket = 0;
    seconds += w.seconds();
  };
  auto start_read = [&](int64_t k) {
    const int64_t b = k % B;
    wait(writing[b], stats_.write_s);
    Stopwatch w;
    reading[b] = file_->submit_read(buffers_[b].data_ptr(), chunk_bytes(), k * chunk_bytes());
    stats_.read_s += w.seconds();
    stats_.bytes_read += chunk_bytes();
  };
  if (K > 0) start_read(0);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t b = k % B;
    wait(reading[b], stats_.read_s);
    if (B > 1 && k + 1 < K) start_read(k + 1);
    Stopwatch s;
    step_chunk(in, k, buffers_[b], on_chunk);
    stats_.step_s += s.seconds();
    Stopwatch w;
    writing[b] = file_->submit_write(buffers_[b].data_ptr(), chunk_bytes(), k * chunk_bytes());
    stats_.write_s += w.seconds();
    stats_.bytes_written += chunk_bytes();
    if (B == 1 && k + 1 < K) start_read(k + 1);
  }
  for (auto& t : writing) wait(t, stats_.write_s);
  ++step_count_;
  stats_.total_s = total.seconds();
}

void NvmeOptimizerState::step_chunk(const optim::StepInputs& in, int64_t k, const at::Tensor& buf,
                                    const ChunkSink& on_chunk) {
  const int64_t begin = k * chunk_, len = chunk_len(k);
  auto& opt = len == chunk_ ? *full_ : *tail_;
  bind_state(opt, buf);
  opt.set_step_count(step_count_);
  const auto segments = cut_segments(in, begin, begin + len);
  optim::StepInputs c = in;
  c.params = buf.narrow(0, 0, len);
  c.grads = in.grads.narrow(0, begin, len);
  c.segments = &segments;
  opt.step(c);
  on_chunk(begin, c.params);
}

}  // namespace xtrain::zero
