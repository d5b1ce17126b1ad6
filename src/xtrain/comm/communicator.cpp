// Communicator: creation (TCPStore rendezvous that names missing ranks), subgroups, Work handles,
// and the failure explanation built from the per-rank arrival records. Collectives themselves are
// in collectives.cpp.
#include "xtrain/comm/communicator.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator_impl.h"

namespace xtrain::comm {
namespace {

using Clock = std::chrono::steady_clock;

std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

std::string host_name() {
  char buf[256] = {0};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("?");
}

// Polls until something accepts TCP connections at host:port (rank 0's store), with a short
// backoff: LibTorch's own client waits ~1 s between attempts, which made every start slow.
bool wait_until_listening(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) == 0) {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        const bool ok = fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        if (fd >= 0) ::close(fd);
        if (ok) {
          ::freeaddrinfo(res);
          return true;
        }
      }
      ::freeaddrinfo(res);
    }
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

}  // namespace

// ---- Work ----

struct Work::Impl {
  compat::WorkPtr work;
  std::shared_future<void> future;
  std::function<void()> then;
  ImplPtr comm;
  std::string op;
  int64_t seq = 0;
  Clock::time_point started = Clock::now();
  std::mutex mutex;
  bool done = false;
  std::exception_ptr error;
};

Work::Work() = default;

void Work::wait() {
  if (!impl_) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!impl_->done) {
    try {
      if (impl_->work) impl_->work->wait();
      if (impl_->future.valid()) impl_->future.get();
      if (impl_->then) impl_->then();
    } catch (const CommError&) {
      impl_->error = std::current_exception();
    } catch (const std::exception& e) {
      const double waited = std::chrono::duration<double>(Clock::now() - impl_->started).count();
      impl_->error = std::make_exception_ptr(impl_->comm->explain(impl_->op, impl_->seq, waited, e.what()));
    }
    impl_->done = true;
    impl_->work.reset();  // release the tensors
  }
  if (impl_->error) std::rethrow_exception(impl_->error);
}

bool Work::completed() const {
  if (!impl_) return true;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->done) return true;
  if (impl_->work) return impl_->work->isCompleted();
  return impl_->future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

Work make_work(compat::WorkPtr work, std::function<void()> then, ImplPtr impl, std::string op, int64_t seq) {
  auto w = std::make_shared<Work::Impl>();
  w->work = std::move(work);
  w->then = std::move(then);
  w->comm = std::move(impl);
  w->op = std::move(op);
  w->seq = seq;
  return Work(w);
}

Work make_work(std::shared_future<void> future, std::function<void()> then, ImplPtr impl, std::string op,
               int64_t seq) {
  auto w = std::make_shared<Work::Impl>();
  w->future = std::move(future);
  w->then = std::move(then);
  w->comm = std::move(impl);
  w->op = std::move(op);
  w->seq = seq;
  return Work(w);
}

// ---- Impl ----

int64_t Communicator::Impl::arrive(const std::string& op, int64_t bytes, int64_t sent_bytes) {
  const int64_t s = ++seq;
  {
    std::lock_guard<std::mutex> lock(stats_mutex);
    stats.collectives += 1;
    stats.bytes += bytes;
    stats.sent_bytes += sent_bytes;
    if (op == "all_reduce") stats.all_reduces += 1;
    if (op == "reduce_scatter") stats.reduce_scatters += 1;
    if (op == "all_gather") stats.all_gathers += 1;
    if (op == "broadcast") stats.broadcasts += 1;
  }
  shared->recorder->record(store, "arrive/" + std::to_string(rank), std::to_string(s) + " " + op);
  return s;
}

void Communicator::Impl::count_p2p(int64_t bytes, bool sent) {
  std::lock_guard<std::mutex> lock(stats_mutex);
  stats.p2p += 1;
  stats.bytes += bytes;
  if (sent) stats.sent_bytes += bytes;
}

std::vector<Arrival> Communicator::Impl::read_arrivals(std::string* problem) const {
  std::vector<Arrival> out(size);
  try {
    std::lock_guard<std::mutex> lock(shared->store_mutex);
    for (int r = 0; r < size; ++r) {
      const std::string key = "arrive/" + std::to_string(r);
      if (!store->check({key})) continue;
      const std::string v = compat::text(store->get(key));
      const auto sp = v.find(' ');
      out[r].seq = std::atoll(v.substr(0, sp).c_str());
      out[r].op = sp == std::string::npos ? "" : v.substr(sp + 1);
    }
  } catch (const std::exception& e) {
    *problem = c10::str("the rendezvous store at ", shared->info.master_addr, ":", shared->info.master_port,
                        " (hosted by rank 0) is unreachable, so rank 0 has probably exited: ", first_line(e.what()));
  }
  return out;
}

CommError Communicator::Impl::explain(const std::string& op, int64_t at_seq, double waited_s,
                                      const std::string& cause) const {
  std::string problem;
  auto arrivals = read_arrivals(&problem);
  if (arrivals[rank].seq < at_seq) arrivals[rank] = Arrival{at_seq, op};  // ours may still be in flight
  const std::string who = problem.empty() ? describe_arrivals(at_seq, arrivals, global_ranks) : problem;
  return CommError(c10::str("comm: ", op, " #", at_seq, " on ", name, " (rank ", global_ranks[rank], ", ", size,
                            " ranks) failed after ", std::round(waited_s * 10) / 10, " s: ", who, " [timeout ", timeout.count() / 1000.0,
                            " s, xtrain.comm.timeout_seconds; cause: ", first_line(cause), "]"));
}

Executor& Communicator::Impl::exec() {
  std::lock_guard<std::mutex> lock(executor_mutex);
  if (!executor) executor = std::make_unique<Executor>();
  return *executor;
}

std::string describe_arrivals(int64_t seq, const std::vector<Arrival>& arrivals, const std::vector<int>& global_ranks) {
  std::vector<int> missing;
  std::string details;
  for (size_t r = 0; r < arrivals.size(); ++r) {
    if (arrivals[r].seq >= seq) continue;
    missing.push_back(global_ranks[r]);
    details += c10::str(details.empty() ? "" : "; ", "rank ", global_ranks[r], " last started ",
                        arrivals[r].seq == 0 ? std::string("no collective")
                                             : c10::str("#", arrivals[r].seq, " ", arrivals[r].op));
  }
  if (!missing.empty()) {
    return c10::str(missing.size() == 1 ? "rank " : "ranks ", join_ranks(missing), " did not arrive (", details, ")");
  }
  std::string ops;
  for (size_t r = 0; r < arrivals.size(); ++r) {
    if (arrivals[r].seq == seq) ops += c10::str(ops.empty() ? "" : ", ", "rank ", global_ranks[r], " ", arrivals[r].op);
  }
  return c10::str("every rank arrived (at #", seq, ": ", ops, "); a peer failed or the connection broke");
}

void rendezvous(const compat::StorePtr& store, std::mutex& mutex, int rank, int size, std::chrono::milliseconds timeout,
                const std::string& what, const std::vector<int>& global_ranks) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    store->set("rdzv/" + std::to_string(rank), compat::bytes(host_name()));
  }
  // Polls with check() (no blocking store wait that could leave a reply in flight on timeout).
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (int r = 0; r < size; ++r) {
        if (!store->check({"rdzv/" + std::to_string(r)})) missing.push_back(global_ranks[r]);
      }
    }
    if (missing.empty()) return;
    if (Clock::now() > deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  throw CommError(c10::str("comm: rendezvous of ", what, " timed out after ", timeout.count() / 1000.0,
                           " s (xtrain.comm.timeout_seconds): ", missing.size() == 1 ? "rank " : "ranks ",
                           join_ranks(missing), " did not arrive"));
}

// ---- Communicator ----

Communicator::Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

std::shared_ptr<Communicator> Communicator::single() { return std::make_shared<Communicator>(std::make_shared<Impl>()); }

std::shared_ptr<Communicator> Communicator::create(const RankInfo& info, const CommOptions& options,
                                                  double rendezvous_timeout_s) {
  XTRAIN_USAGE_CHECK(options.timeout_seconds > 0, "comm: xtrain.comm.timeout_seconds must be > 0, got ",
                     options.timeout_seconds);
  XTRAIN_USAGE_CHECK(options.backend == "auto" || options.backend == "gloo", "comm: xtrain.comm.backend \"",
                     options.backend, "\" is not available in this build (LibTorch without NCCL/MPI); use gloo or auto");
  if (info.world_size <= 1) return single();
  auto shared = std::make_shared<Shared>();
  shared->recorder = std::make_unique<ArrivalRecorder>(shared->store_mutex);
  shared->info = info;
  shared->options = options;
  shared->gloo_devices = gloo_devices_for(info.master_addr);  // UsageError for a wrong GLOO_SOCKET_IFNAME
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  const auto rdzv_timeout = rendezvous_timeout_s > 0
                                ? std::chrono::milliseconds(static_cast<int64_t>(rendezvous_timeout_s * 1000))
                                : timeout;
  const std::string where = c10::str(info.master_addr, ":", info.master_port);
  const auto deadline = Clock::now() + rdzv_timeout;
  try {
    if (info.rank != 0 && !wait_until_listening(info.master_addr, info.master_port, deadline)) {
      throw std::runtime_error("nothing accepted connections there");
    }
    // LibTorch's store client rounds its connect timeout to whole seconds: give it at least 5 s
    // (the rendezvous below enforces the configured timeout).
    shared->store = compat::make_tcp_store(info.master_addr, info.master_port, info.rank == 0,
                                           std::max(rdzv_timeout, std::chrono::milliseconds(5000)));
  } catch (const std::exception& e) {
    if (info.rank == 0) {
      throw CommError(c10::str("comm: rank 0 could not host the rendezvous store at ", where,
                               " (is MASTER_PORT in use?): ", first_line(e.what())));
    }
    throw CommError(c10::str("comm: rendezvous: rank ", info.rank, " could not reach rank 0's store at ", where,
                             " within ", rdzv_timeout.count() / 1000.0, " s: rank 0 did not",
                             " arrive (check MASTER_ADDR/MASTER_PORT): ", first_line(e.what())));
  }
  auto impl = std::make_shared<Impl>();
  impl->shared = shared;
  impl->store = compat::prefixed("w/", shared->store);
  impl->rank = info.rank;
  impl->size = info.world_size;
  impl->global_ranks.resize(info.world_size);
  for (int r = 0; r < info.world_size; ++r) impl->global_ranks[r] = r;
  impl->timeout = timeout;
  rendezvous(impl->store, shared->store_mutex, impl->rank, impl->size, rdzv_timeout, "world at " + where,
             impl->global_ranks);
  try {
    impl->pg = compat::make_gloo(compat::prefixed("pg/", impl->store), info.rank, info.world_size, timeout,
                                 shared->gloo_devices);
  } catch (const std::exception& e) {
    throw CommError(c10::str("comm: connecting the Gloo group (", info.world_size, " ranks) on ",
                             describe(shared->gloo_devices), " failed: ", first_line(e.what())));
  }
  return std::make_shared<Communicator>(impl);
}

std::shared_ptr<Communicator> Communicator::new_group(const std::vector<int>& world_ranks) {
  std::vector<int> sorted = world_ranks;
  std::sort(sorted.begin(), sorted.end());
  TORCH_CHECK(!sorted.empty() && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
              "comm: new_group needs distinct ranks, got [", join_ranks(world_ranks), "]");
  for (int r : sorted) {
    TORCH_CHECK(std::find(impl_->global_ranks.begin(), impl_->global_ranks.end(), r) != impl_->global_ranks.end(),
                "comm: new_group: rank ", r, " is not in ", impl_->name);
  }
  const int me = impl_->global_ranks[impl_->rank];
  const auto pos = std::find(world_ranks.begin(), world_ranks.end(), me);
  if (!impl_->shared) return pos == world_ranks.end() ? nullptr : single();
  const int id = impl_->shared->next_group++;
  if (pos == world_ranks.end()) return nullptr;
  auto g = std::make_shared<Impl>();
  g->shared = impl_->shared;
  g->store = compat::prefixed("g" + std::to_string(id) + "/", impl_->shared->store);
  g->rank = static_cast<int>(pos - world_ranks.begin());
  g->size = static_cast<int>(world_ranks.size());
  g->global_ranks = world_ranks;
  g->name = c10::str("group ", id, " [", join_ranks(world_ranks), "]");
  g->timeout = impl_->timeout;
  if (g->size == 1) return std::make_shared<Communicator>(g);  // no group needed; collectives are local
  rendezvous(g->store, g->shared->store_mutex, g->rank, g->size, g->timeout, g->name, g->global_ranks);
  g->pg = compat::make_gloo(compat::prefixed("pg/", g->store), g->rank, g->size, g->timeout, g->shared->gloo_devices);
  return std::make_shared<Communicator>(g);
}

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
const std::vector<int>& Communicator::global_ranks() const { return impl_->global_ranks; }
std::string Communicator::name() const { return impl_->name; }
double Communicator::timeout_seconds() const { return impl_->timeout.count() / 1000.0; }

CommStats Communicator::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  return impl_->stats;
}

}  // namespace xtrain::comm
