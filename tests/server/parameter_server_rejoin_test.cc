// A worker's stream breaks and a new one of the same rank rejoins: the real
// ParameterServer over gRPC on loopback (port 0), driven by the worker's own protocol
// pieces (WorkerCore, ServerConnection) without libtorch. Waits are on the parameters'
// versions (VersionTracker) and on Wait(), with deadlines, never sleeps.
#include <catch2/catch.hpp>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"
#include "server/parameter_server.h"
#include "worker/server_connection.h"

namespace p3 {
namespace {

// One tensor "w" of 6 values in slices of 3: slice 0 = [0,3), slice 1 = [3,6); one server.
// `owner_params` > 0: in ownership stripes, so that it can be re-planned.
ClusterSignature Signature(int64_t owner_params = 0) {
  ClusterSignature sig;
  sig.plan.owner_params = owner_params;
  sig.num_workers = 2;
  sig.num_servers = 1;
  sig.tensors = {{"w", {6}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = 3;
  sig.plan.num_servers = 1;
  sig.values_on_push = true;
  sig.priority = true;
  return sig;
}

const absl::Duration kBound = absl::Seconds(20);  // only reached if something is broken

// One worker process as far as the protocol goes: its buffers, core and connection.
class FakeWorker : public TransportListener {
 public:
  FakeWorker(int rank, float grad_scale, int64_t owner_params = 0)
      : rank_(rank),
        owner_params_(owner_params),
        plan_(*SlicePlan::Create({{"w", 6}}, Signature(owner_params).plan)),
        params_(6, 0.0f),
        grads_(6, 0.0f),
        tracker_(2),
        core_({.rank = rank, .num_servers = 1, .values_on_push = true}, plan_, params_.data(),
              grads_.data(), &tracker_) {
    if (rank == 0) params_ = {1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 6; ++i) grads_[i] = grad_scale * static_cast<float>(i + 1);
  }
  ~FakeWorker() override {
    if (conn_ != nullptr) conn_->Shutdown();
  }

  absl::Status Open(int port, bool rejoin) {
    TransportOptions options;
    options.address = "127.0.0.1:" + std::to_string(port);
    options.rank = rank_;
    options.signature = Signature(owner_params_);
    options.peer_timeout = kBound;
    options.rejoin = rejoin;
    options.core = &core_;
    options.listener = this;
    absl::StatusOr<std::unique_ptr<ServerConnection>> conn = ServerConnection::Open(options);
    if (!conn.ok()) return conn.status();
    conn_ = *std::move(conn);
    // As Worker does: a server that is a new process answers a rejoin as a first start.
    const bool rejoined = conn_->rejoined();
    const uint64_t at = rejoined ? conn_->current_version() : conn_->start_version();
    if (absl::Status s = core_.TakePlan({at}, {conn_->plan_in_force()}); !s.ok()) return s;
    absl::StatusOr<std::vector<ToServer>> first =
        rejoin ? core_.Resume({at}, {rejoined}) : core_.Start({conn_->start_version()});
    if (!first.ok()) return first.status();
    for (const ToServer& m : *first) conn_->Send(m);
    return absl::OkStatus();
  }

  void SendGradient(int slice, uint64_t iteration) {
    absl::StatusOr<ToServer> m = core_.Gradient(slice, iteration);
    CATCH_REQUIRE(m.ok());
    conn_->Send(*m);
  }

  absl::Status WaitFor(uint64_t version) {
    return tracker_.WaitFor(0, static_cast<int>(core_.plan().slices().size()), version,
                            absl::Now() + kBound);
  }

  // Rank 0: slices of `slice_params` from iteration `from` on (Replans::Request's message).
  void SendReplan(uint64_t from, int64_t slice_params) {
    conn_->Send(ToServer{.server = 0,
                         .message = Upstream{.kind = Upstream::Kind::kReplan,
                                             .from_iteration = from,
                                             .slice_params = slice_params},
                         .priority = std::numeric_limits<int64_t>::min()});
  }
  // As Replans::SwitchIfDue before the first gradient of `version`.
  absl::Status Switch(int64_t slice_params, uint64_t version) {
    return core_.Replan(*core_.plan().WithSliceParams(slice_params), version);
  }
  // The re-plans the server forwards: this worker switches explicitly (Switch).
  void OnReplan(int, uint64_t from, int64_t slice_params) override {
    absl::MutexLock lock(&mu_);
    forwarded_.emplace_back(from, slice_params);
  }
  std::vector<std::pair<uint64_t, int64_t>> forwarded() const {
    absl::MutexLock lock(&mu_);
    return forwarded_;
  }
  WorkerCore& core() { return core_; }

  // The process dies: its stream is cut.
  void Die() { conn_->Shutdown(); }
  absl::Status Close() { return conn_->Close(absl::Now() + kBound); }

  const ServerConnection& connection() const { return *conn_; }
  const std::vector<float>& params() const { return params_; }

  // Values and Acks go to the core (an Ack is refused there: values come with the push).
  void OnBuffers(int, uint64_t, absl::string_view) override {
    tracker_.Abort(absl::InternalError("buffers"));
  }
  void OnFailure(int, const absl::Status& status) override { tracker_.Abort(status); }

 private:
  const int rank_;
  const int64_t owner_params_;
  SlicePlan plan_;
  std::vector<float> params_;
  std::vector<float> grads_;
  VersionTracker tracker_;
  WorkerCore core_;
  std::unique_ptr<ServerConnection> conn_;
  mutable absl::Mutex mu_;
  std::vector<std::pair<uint64_t, int64_t>> forwarded_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<ParameterServer> StartServer(absl::Duration rejoin_timeout) {
  ServerOptions options;
  options.shard.num_workers = 2;
  options.shard.optimizer.lr = 0.5;
  options.shard.optimizer.momentum = 0;
  options.peer_timeout = kBound;
  options.rejoin_timeout = rejoin_timeout;
  absl::StatusOr<std::unique_ptr<ParameterServer>> server = ParameterServer::Start(options);
  CATCH_REQUIRE(server.ok());
  return *std::move(server);
}

bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

CATCH_TEST_CASE("a second server on a port that another server holds fails to start") {
  std::unique_ptr<ParameterServer> first = StartServer(kBound);
  ServerOptions options;
  options.shard.num_workers = 2;
  options.address = "127.0.0.1:" + std::to_string(first->port());
  absl::StatusOr<std::unique_ptr<ParameterServer>> second = ParameterServer::Start(options);
  CATCH_REQUIRE_FALSE(second.ok());
  CATCH_CHECK(absl::IsUnavailable(second.status()));
  CATCH_CHECK(Mentions(second.status(), "cannot listen on " + options.address));
}

CATCH_TEST_CASE(
    "a worker whose stream broke rejoins, resumes, and the update is the uninterrupted one") {
  std::unique_ptr<ParameterServer> server = StartServer(kBound);
  FakeWorker w0(0, 1.0f), w1(1, 3.0f);
  CATCH_REQUIRE(w0.Open(server->port(), false).ok());
  CATCH_REQUIRE(w1.Open(server->port(), false).ok());
  CATCH_REQUIRE(w0.WaitFor(0).ok());
  CATCH_REQUIRE(w1.WaitFor(0).ok());
  // Iteration 0: worker 0 sends both slices, worker 1 only slice 0 before it dies, so
  // slice 0 reaches version 1 and slice 1 waits at 0.
  w0.SendGradient(0, 0);
  w0.SendGradient(1, 0);
  w1.SendGradient(0, 0);
  w1.Die();

  FakeWorker again(1, 3.0f);
  CATCH_REQUIRE(again.Open(server->port(), /*rejoin=*/true).ok());
  CATCH_CHECK(again.connection().welcome().rejoined());
  CATCH_CHECK(again.connection().current_version() == 0);
  // Version 0 of both slices, slice 0's from before its update.
  CATCH_REQUIRE(again.WaitFor(0).ok());
  CATCH_CHECK(again.params() == std::vector<float>{1, 2, 3, 4, 5, 6});
  again.SendGradient(0, 0);
  again.SendGradient(1, 0);
  CATCH_REQUIRE(again.WaitFor(1).ok());
  CATCH_REQUIRE(w0.WaitFor(1).ok());
  // p - 0.5 * mean(g0, g1) with g0 = i + 1, g1 = 3 (i + 1): p - (i + 1).
  CATCH_CHECK(w0.params() == std::vector<float>{0, 0, 0, 0, 0, 0});
  CATCH_CHECK(again.params() == w0.params());
  CATCH_CHECK(w0.Close().ok());
  CATCH_CHECK(again.Close().ok());
  CATCH_CHECK(server->Wait().ok());
}

CATCH_TEST_CASE(
    "a worker rejoining after a re-plan takes the plan from the Welcome and the update is the "
    "uninterrupted one") {
  std::unique_ptr<ParameterServer> server = StartServer(kBound);
  FakeWorker w0(0, 1.0f, /*owner_params=*/6), w1(1, 3.0f, 6);
  CATCH_REQUIRE(w0.Open(server->port(), false).ok());
  CATCH_REQUIRE(w1.Open(server->port(), false).ok());
  CATCH_REQUIRE(w0.WaitFor(0).ok());
  CATCH_REQUIRE(w1.WaitFor(0).ok());
  w0.SendReplan(/*from=*/2, /*slice_params=*/2);  // slices of 2 from iteration 2 on
  for (uint64_t it = 0; it < 2; ++it) {
    CATCH_REQUIRE(w0.WaitFor(it).ok());
    CATCH_REQUIRE(w1.WaitFor(it).ok());
    for (FakeWorker* w : {&w0, &w1}) {
      w->SendGradient(0, it);
      w->SendGradient(1, it);
    }
  }
  CATCH_REQUIRE(w0.WaitFor(2).ok());
  CATCH_REQUIRE(w1.WaitFor(2).ok());
  CATCH_CHECK(w1.forwarded() == std::vector<std::pair<uint64_t, int64_t>>{{2, 2}});
  for (FakeWorker* w : {&w0, &w1}) CATCH_REQUIRE(w->Switch(2, 2).ok());
  // Iteration 2 in slices of 2: worker 0 sends all three, worker 1 slice 0, then dies.
  for (int slice = 0; slice < 3; ++slice) w0.SendGradient(slice, 2);
  w1.SendGradient(0, 2);
  w1.Die();

  FakeWorker again(1, 3.0f, 6);
  CATCH_REQUIRE(again.Open(server->port(), /*rejoin=*/true).ok());
  CATCH_CHECK(again.connection().welcome().rejoined());
  CATCH_CHECK(again.connection().welcome().plan_slice_params() == 2);
  CATCH_CHECK(again.connection().welcome().plan_from_iteration() == 2);
  CATCH_CHECK(again.core().plan().slices().size() == 3);
  CATCH_REQUIRE(again.WaitFor(2).ok());
  for (int slice = 0; slice < 3; ++slice) again.SendGradient(slice, 2);
  CATCH_REQUIRE(again.WaitFor(3).ok());
  CATCH_REQUIRE(w0.WaitFor(3).ok());
  // Each update is p - 0.5 * mean(g0, g1) = p - (i + 1), from p = i + 1: three of them.
  CATCH_CHECK(w0.params() == std::vector<float>{-2, -4, -6, -8, -10, -12});
  CATCH_CHECK(again.params() == w0.params());
  CATCH_CHECK(w0.Close().ok());
  CATCH_CHECK(again.Close().ok());
  CATCH_CHECK(server->Wait().ok());
}

CATCH_TEST_CASE("a server's memory for streams stays bounded however often a worker rejoins") {
  // Each stream over the network had a lane of the server's send queue that outlived it
  // (with its queue's storage): ~4 KB per rejoin (docs/results/reliability/soak.md).
  std::unique_ptr<ParameterServer> server = StartServer(kBound);
  FakeWorker w0(0, 1.0f);
  auto w1 = std::make_unique<FakeWorker>(1, 3.0f);
  CATCH_REQUIRE(w0.Open(server->port(), false).ok());
  CATCH_REQUIRE(w1->Open(server->port(), false).ok());
  constexpr int kRejoins = 20;
  for (uint64_t it = 0; it < kRejoins; ++it) {
    CATCH_REQUIRE(w0.WaitFor(it).ok());
    CATCH_REQUIRE(w1->WaitFor(it).ok());
    if (it > 0) {  // every slice at `it`: the new process resumes there
      w1->Die();
      w1 = std::make_unique<FakeWorker>(1, 3.0f);
      CATCH_REQUIRE(w1->Open(server->port(), /*rejoin=*/true).ok());
      CATCH_REQUIRE(w1->WaitFor(it).ok());
    }
    for (FakeWorker* w : {&w0, w1.get()}) {
      w->SendGradient(0, it);
      w->SendGradient(1, it);
    }
  }
  CATCH_REQUIRE(w0.WaitFor(kRejoins).ok());
  // Two live streams; a third lane while a rejoining stream overlaps its predecessor's end.
  CATCH_CHECK(server->network_lane_slots() >= 2);
  CATCH_CHECK(server->network_lane_slots() <= 3);
}

CATCH_TEST_CASE("a worker not back within rejoin_timeout fails the run, naming it") {
  std::unique_ptr<ParameterServer> server = StartServer(absl::Milliseconds(300));
  FakeWorker w0(0, 1.0f), w1(1, 3.0f);
  CATCH_REQUIRE(w0.Open(server->port(), false).ok());
  CATCH_REQUIRE(w1.Open(server->port(), false).ok());
  CATCH_REQUIRE(w0.WaitFor(0).ok());
  w0.SendGradient(0, 0);
  w1.Die();
  const absl::Status failed = server->Wait();
  CATCH_CHECK(absl::IsDeadlineExceeded(failed));
  CATCH_CHECK(Mentions(failed, "worker 1: died and did not rejoin within 300ms"));
  // The other worker is told by an Abort, not by its own timeout.
  const absl::Status told = w0.WaitFor(1);
  CATCH_CHECK(Mentions(told, "worker 1: died and did not rejoin"));
}

CATCH_TEST_CASE("a rejoin is refused by a server with rejoins off, and only that stream ends") {
  std::unique_ptr<ParameterServer> server = StartServer(absl::ZeroDuration());
  FakeWorker w0(0, 1.0f);
  CATCH_REQUIRE(w0.Open(server->port(), false).ok());
  FakeWorker w1(1, 3.0f);
  const absl::Status refused = w1.Open(server->port(), /*rejoin=*/true);
  CATCH_CHECK(absl::IsFailedPrecondition(refused));
  CATCH_CHECK(Mentions(refused, "does not accept rejoins (cluster.rejoin_timeout_s is 0)"));
  FakeWorker w1b(1, 3.0f);
  CATCH_REQUIRE(w1b.Open(server->port(), false).ok());
  CATCH_CHECK(w0.WaitFor(0).ok());
  CATCH_CHECK(w1b.WaitFor(0).ok());
}

CATCH_TEST_CASE("a rejoin Hello to a new server process, before every worker joined, is a join") {
  // What a worker restarted by Kubernetes finds when the servers were restarted as well.
  std::unique_ptr<ParameterServer> server = StartServer(kBound);
  FakeWorker w0(0, 1.0f), w1(1, 3.0f);
  CATCH_REQUIRE(w0.Open(server->port(), /*rejoin=*/true).ok());
  CATCH_CHECK_FALSE(w0.connection().welcome().rejoined());
  CATCH_CHECK(w0.connection().start_version() == 0);
  CATCH_REQUIRE(w1.Open(server->port(), /*rejoin=*/true).ok());
  CATCH_CHECK_FALSE(w1.connection().welcome().rejoined());
  // A normal run from there: rank 0's initial values, one update.
  CATCH_REQUIRE(w1.WaitFor(0).ok());
  CATCH_CHECK(w1.params() == std::vector<float>{1, 2, 3, 4, 5, 6});
  for (FakeWorker* w : {&w0, &w1}) {
    w->SendGradient(0, 0);
    w->SendGradient(1, 0);
  }
  CATCH_REQUIRE(w1.WaitFor(1).ok());
  CATCH_CHECK(w1.params() == std::vector<float>{0, 0, 0, 0, 0, 0});
  // Once every worker has joined, a rejoin is a rejoin again.
  w1.Die();
  FakeWorker again(1, 3.0f);
  CATCH_REQUIRE(again.Open(server->port(), /*rejoin=*/true).ok());
  CATCH_CHECK(again.connection().welcome().rejoined());
  CATCH_CHECK(again.connection().current_version() == 1);
}

CATCH_TEST_CASE("a worker lost before every worker joined fails the run at once, even with rejoins") {
  std::unique_ptr<ParameterServer> server = StartServer(kBound);
  FakeWorker w0(0, 1.0f), w1(1, 3.0f);
  CATCH_REQUIRE(w0.Open(server->port(), false).ok());
  CATCH_REQUIRE(w0.WaitFor(0).ok());  // the initial values are in; worker 1 never came
  w0.Die();
  const absl::Status failed = server->Wait();  // not rejoin_timeout (20 s) later
  CATCH_CHECK(absl::IsUnavailable(failed));
  CATCH_CHECK(Mentions(failed, "disconnected before every worker had joined this server"));
}

CATCH_TEST_CASE("a Resume older than the server's slices fails the run: the server must restart") {
  std::unique_ptr<ParameterServer> server = StartServer(kBound);
  FakeWorker w0(0, 1.0f), w1(1, 3.0f);
  CATCH_REQUIRE(w0.Open(server->port(), false).ok());
  CATCH_REQUIRE(w1.Open(server->port(), false).ok());
  for (uint64_t it = 0; it < 2; ++it) {
    for (FakeWorker* w : {&w0, &w1}) {
      CATCH_REQUIRE(w->WaitFor(it).ok());
      w->SendGradient(0, it);
      w->SendGradient(1, it);
    }
  }
  CATCH_REQUIRE(w0.WaitFor(2).ok());
  w0.Die();
  w1.Die();
  // A new process of rank 0 whose other server restarted from the checkpoint of 0.
  FakeWorker again(0, 1.0f);
  SlicePlan plan = *SlicePlan::Create({{"w", 6}}, Signature().plan);
  std::vector<float> params(6), grads(6);
  VersionTracker tracker(2);
  WorkerCore core({.rank = 0, .num_servers = 1, .values_on_push = true}, plan, params.data(),
                  grads.data(), &tracker);
  TransportOptions options;
  options.address = "127.0.0.1:" + std::to_string(server->port());
  options.rank = 0;
  options.signature = Signature();
  options.peer_timeout = kBound;
  options.rejoin = true;
  options.core = &core;
  options.listener = &again;
  absl::StatusOr<std::unique_ptr<ServerConnection>> conn = ServerConnection::Open(options);
  CATCH_REQUIRE(conn.ok());
  CATCH_CHECK((*conn)->welcome().rejoined());
  CATCH_CHECK((*conn)->current_version() == 2);
  (*conn)->Send(ToServer{.server = 0,
                         .message = Upstream{.kind = Upstream::Kind::kResume, .version = 0}});
  const absl::Status failed = server->Wait();
  CATCH_CHECK(absl::IsFailedPrecondition(failed));
  CATCH_CHECK(Mentions(failed, "resumes at iteration 0, before this server's slice"));
  CATCH_CHECK(Mentions(failed, "it must restart from that checkpoint too"));
  (*conn)->Shutdown();
}

}  // namespace
}  // namespace p3
