// rejoin_memory: does a server's memory grow with every worker rejoin? Drives one real
// ParameterServer (gRPC on loopback, port 0) through hundreds of rejoins of a worker in
// one process, and records after each rejoin glibc's heap in use (mallinfo2: uordblks +
// hblkhd, i.e. what is allocated, not what the allocator keeps), the process's RSS, its
// shared-memory mappings, and where the rest of RSS could be: the heap glibc holds
// (mallinfo2 arena: every arena's pages taken from the system, in use or not), the free
// bytes in it (fordblks), the number of threads (each has a stack) and of mappings. A
// leak grows the heap in use per rejoin; a high-water mark grows RSS only.
//
//   bazel build //tools:rejoin_memory
//   bazel-bin/tools/rejoin_memory --rejoins=300 --shared_memory --csv=out.csv
//
// The workers are the worker's own protocol pieces (WorkerCore, ServerConnection) without
// libtorch, as in tests/server/parameter_server_rejoin_test.cc: 2 workers, a tensor of
// --params floats in slices of --slice_params, SGD. Each round: both workers finish one
// iteration, worker 1's stream is cut (the process died) and a new worker 1 rejoins,
// resumes and does the next iteration; then the figures are taken. The rejoining
// worker's objects are destroyed each round, so what the workers allocate is freed too.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "p3/base/file_util.h"
#include "p3/core/shared_memory.h"
#include "p3/core/slice_plan.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"
#include "proto/program.h"
#include "server/parameter_server.h"
#include "worker/server_connection.h"

ABSL_FLAG(int, rejoins, 300, "how many times worker 1 dies and rejoins");
ABSL_FLAG(int64_t, params, 60000, "floats in the model (one tensor)");
ABSL_FLAG(int64_t, slice_params, 2000, "floats per slice");
ABSL_FLAG(bool, shared_memory, false,
          "the workers offer their buffers in shared memory, as colocated workers do");
ABSL_FLAG(std::string, csv, "", "where to write one row per rejoin (default: stdout)");
ABSL_FLAG(bool, one_arena, true,
          "all threads allocate from one malloc arena, as in p3_server (false: one arena "
          "per thread, as in p3_worker and as p3_server was before commit f4edb82)");
ABSL_FLAG(int, settle_ms, 0,
          "wait this long after each round before taking the figures, for what is still in "
          "flight in gRPC to arrive and be freed");
ABSL_FLAG(bool, exit_running, false,
          "exit at once after the last rejoin, the server still running: under valgrind "
          "--show-leak-kinds=reachable, what is allocated then, by stack");

namespace p3 {
namespace {

const absl::Duration kBound = absl::Seconds(30);

ClusterSignature Signature(int64_t n, int64_t slice_params) {
  ClusterSignature sig;
  sig.num_workers = 2;
  sig.num_servers = 1;
  sig.tensors = {{"w", {n}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = slice_params;
  sig.plan.num_servers = 1;
  sig.values_on_push = true;
  sig.priority = true;
  return sig;
}

// One worker process as far as the protocol goes.
class Worker : public TransportListener {
 public:
  Worker(int rank, const ClusterSignature& sig, bool shared)
      : rank_(rank),
        sig_(sig),
        plan_(*SlicePlan::Create({{"w", sig.tensors[0].shape[0]}}, sig.plan)),
        tracker_(static_cast<int>(plan_.slices().size())) {
    const int64_t n = plan_.total_params();
    if (shared) {
      absl::StatusOr<std::unique_ptr<SharedRegion>> region = SharedRegion::Create(n);
      if (region.ok()) region_ = *std::move(region);
    }
    if (region_ == nullptr) {
      own_params_.assign(n, 0.0f);
      own_grads_.assign(n, 0.0f);
    }
    float* params = region_ ? region_->params() : own_params_.data();
    float* grads = region_ ? region_->grads() : own_grads_.data();
    for (int64_t i = 0; i < n; ++i) {
      params[i] = rank == 0 ? 0.001f * static_cast<float>(i % 1000) : 0.0f;
      grads[i] = 0.01f * static_cast<float>(rank + 1);
    }
    core_ = std::make_unique<WorkerCore>(
        WorkerCoreOptions{.rank = rank, .num_servers = 1, .values_on_push = true}, plan_, params,
        grads, &tracker_);
  }
  ~Worker() override {
    if (conn_ != nullptr) conn_->Shutdown();
  }

  absl::Status Open(int port, bool rejoin) {
    TransportOptions options;
    options.address = absl::StrCat("127.0.0.1:", port);
    options.rank = rank_;
    options.signature = sig_;
    options.peer_timeout = kBound;
    options.rejoin = rejoin;
    if (region_ != nullptr) {
      options.shared_memory_name = region_->name();
      options.shared_memory_nonce = region_->nonce();
    }
    options.core = core_.get();
    options.listener = this;
    absl::StatusOr<std::unique_ptr<ServerConnection>> conn = ServerConnection::Open(options);
    if (!conn.ok()) return conn.status();
    conn_ = *std::move(conn);
    if (region_ != nullptr) region_->Unlink();
    absl::StatusOr<std::vector<ToServer>> first =
        rejoin ? core_->Resume({conn_->current_version()}, {conn_->rejoined()})
               : core_->Start({conn_->start_version()});
    if (!first.ok()) return first.status();
    for (const ToServer& m : *first) conn_->Send(m);
    return absl::OkStatus();
  }

  absl::Status Iteration(uint64_t it) {
    const int slices = static_cast<int>(plan_.slices().size());
    if (absl::Status s = tracker_.WaitFor(0, slices, it, absl::Now() + kBound); !s.ok()) return s;
    for (int id = 0; id < slices; ++id) {
      absl::StatusOr<ToServer> m = core_->Gradient(id, it);
      if (!m.ok()) return m.status();
      conn_->Send(*m);
    }
    return absl::OkStatus();
  }

  absl::Status WaitFor(uint64_t version) {
    return tracker_.WaitFor(0, static_cast<int>(plan_.slices().size()), version,
                            absl::Now() + kBound);
  }

  void Die() { conn_->Shutdown(); }

  // Values and Acks go to the core (an Ack is refused there: values come with the push).
  void OnBuffers(int, uint64_t, absl::string_view) override {}
  void OnFailure(int, const absl::Status& status) override { tracker_.Abort(status); }

 private:
  const int rank_;
  const ClusterSignature sig_;
  SlicePlan plan_;
  std::unique_ptr<SharedRegion> region_;
  std::vector<float> own_params_;
  std::vector<float> own_grads_;
  VersionTracker tracker_;
  std::unique_ptr<WorkerCore> core_;
  std::unique_ptr<ServerConnection> conn_;
};

struct HeapFigures {
  int64_t in_use = 0;  // uordblks + hblkhd: allocated and not freed
  int64_t arena = 0;   // pages the arenas took from the system (sbrk and heaps)
  int64_t hblkhd = 0;  // in mmapped chunks (none with p3's allocator settings)
  int64_t free = 0;    // fordblks: free bytes the arenas keep
};

HeapFigures Heap() {
  const struct mallinfo2 info = mallinfo2();
  return {.in_use = static_cast<int64_t>(info.uordblks + info.hblkhd),
          .arena = static_cast<int64_t>(info.arena),
          .hblkhd = static_cast<int64_t>(info.hblkhd),
          .free = static_cast<int64_t>(info.fordblks)};
}

// Lines of /proc/self/status "Threads:".
int Threads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

struct Mappings {
  int all = 0;
  int shared = 0;  // of p3's shared-memory regions
};

Mappings CountMappings() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  Mappings n;
  while (std::getline(maps, line)) {
    ++n.all;
    if (line.find("/dev/shm/p3-") != std::string::npos) ++n.shared;
  }
  return n;
}

int Run() {
  const int rejoins = absl::GetFlag(FLAGS_rejoins);
  const bool shared = absl::GetFlag(FLAGS_shared_memory);
  const ClusterSignature sig =
      Signature(absl::GetFlag(FLAGS_params), absl::GetFlag(FLAGS_slice_params));
  ServerOptions options;
  options.shard.num_workers = 2;
  options.shard.optimizer.lr = 0.01;
  options.shard.optimizer.momentum = 0.9;
  options.peer_timeout = kBound;
  options.rejoin_timeout = kBound;
  options.shared_memory = shared;
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Start(options);
  if (!server.ok()) {
    std::cerr << "rejoin_memory: " << server.status() << "\n";
    return 1;
  }
  const int port = (*server)->port();
  auto check = [](const absl::Status& s, const char* what) {
    if (!s.ok()) {
      std::cerr << "rejoin_memory: " << what << ": " << s << "\n";
      std::exit(1);
    }
  };
  Worker w0(0, sig, shared);
  auto w1 = std::make_unique<Worker>(1, sig, shared);
  check(w0.Open(port, false), "worker 0");
  check(w1->Open(port, false), "worker 1");
  std::ostringstream rows;
  rows << "rejoin,iteration,heap_in_use_bytes,rss_bytes,shm_mappings,arena_bytes,hblkhd_bytes,"
          "free_bytes,threads,mappings\n";
  uint64_t it = 0;
  for (int r = 0; r <= rejoins; ++r) {
    if (r > 0) {
      // Worker 1 dies after its gradients of iteration `it`-1 are in; a new one rejoins.
      w1->Die();
      w1.reset();
      w1 = std::make_unique<Worker>(1, sig, shared);
      check(w1->Open(port, true), "rejoin");
    }
    check(w0.Iteration(it), "worker 0's iteration");
    check(w1->Iteration(it), "worker 1's iteration");
    ++it;
    check(w0.WaitFor(it), "worker 0's next version");
    check(w1->WaitFor(it), "worker 1's next version");
    if (const int settle = absl::GetFlag(FLAGS_settle_ms); settle > 0) {
      absl::SleepFor(absl::Milliseconds(settle));
    }
    malloc_trim(0);  // does not change what is in use; only what is kept
    const HeapFigures heap = Heap();
    const Mappings maps = CountMappings();
    rows << r << "," << it << "," << heap.in_use << "," << RssBytes() << "," << maps.shared << ","
         << heap.arena << "," << heap.hblkhd << "," << heap.free << "," << Threads() << ","
         << maps.all << "\n";
  }
  const std::string csv = absl::GetFlag(FLAGS_csv);
  if (csv.empty()) {
    std::cout << rows.str();
  } else {
    check(WriteFileAtomically(csv, rows.str()), "--csv");
  }
  if (absl::GetFlag(FLAGS_exit_running)) std::_Exit(0);
  w0.Die();
  w1->Die();
  (*server)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace p3

int main(int argc, char** argv) {
  // As p3_server does: glibc keeps freed memory for large messages (p3/base/allocator.h), so
  // RSS is a high-water mark here as there. --one_arena is a flag, read before any thread
  // starts; mallopt(M_ARENA_MAX) is set here after parsing, still on the one thread.
  p3::Program program("rejoin_memory", argc, argv, {.allocator = p3::AllocatorOptions{}});
  if (absl::GetFlag(FLAGS_one_arena) && mallopt(M_ARENA_MAX, 1) != 1) {
    std::cerr << "rejoin_memory: mallopt(M_ARENA_MAX) was refused\n";
    return 1;
  }
  return p3::Run();
}
