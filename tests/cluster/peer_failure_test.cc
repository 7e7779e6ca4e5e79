// Peers that fail or never come: the worker gets an error in bounded time instead of
// hanging, and names the failure that caused the others (its own lost server before
// another server's Abort that followed).
#include <grpcpp/grpcpp.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/p3.pb.h"
#include "proto/raw_train.h"
#include "proto/wire_codec.h"
#include "server/parameter_server.h"
#include "tests/cluster/cluster_fixture.h"
#include "worker/worker.h"

namespace p3::cluster_test {
namespace {

CATCH_TEST_CASE("a worker that never comes gives the others an error in bounded time") {
  ServerOptions so;
  so.shard.num_workers = 2;
  auto server = ParameterServer::Start(so);
  CATCH_REQUIRE(server.ok());
  WorkerOptions wo;
  wo.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
  wo.num_workers = 2;
  wo.peer_timeout = absl::Seconds(1);
  auto model = MakeModel(1);
  auto worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  auto [x, y] = GlobalBatch(0, 1);
  auto out = (*worker)->Forward(x);  // version 0 comes from rank 0 itself
  CATCH_REQUIRE(out.ok());
  CATCH_REQUIRE((*worker)->Backward(model->Loss(*out, y)).ok());
  auto next = (*worker)->Forward(x);  // needs worker 1's gradients: never comes
  CATCH_CHECK(absl::IsDeadlineExceeded(next.status()));
  // The worker gives up; its stream ends, and with it the server's run, which says that
  // worker 1 never came (a lone p3_server ends instead of waiting for it).
  worker->reset();
  const absl::Status ended = (*server)->Wait();
  CATCH_CHECK(!ended.ok());
  CATCH_CHECK(absl::StrContains(ended.message(), "worker 1 has not joined this server"));
  (*server)->Shutdown();
}

CATCH_TEST_CASE("a server that never answers the Hello fails the worker within peer_timeout") {
  // Accepts the stream, reads the Hello, then waits for more that never comes: no Welcome.
  RawTrainService silent([](grpc::ServerContext*, RawTrainServerStream* stream) {
    grpc::ByteBuffer message;
    while (stream->Read(&message)) {
    }
    return grpc::Status::OK;
  });
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&silent);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  CATCH_REQUIRE(server != nullptr);
  WorkerOptions wo;
  wo.servers = {"127.0.0.1:" + std::to_string(port)};
  wo.peer_timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, MakeModel(1));
  CATCH_CHECK(absl::IsDeadlineExceeded(worker.status()));
  CATCH_CHECK(absl::StrContains(worker.status().message(), "no Welcome"));
  CATCH_CHECK(absl::StrContains(worker.status().message(), "server 0"));
  // Bounded: not the default 60 s, nor forever (a loose bound, not a timing assertion).
  CATCH_CHECK(absl::Now() - start < absl::Seconds(20));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

// A stand-in server for the failure-order cases: welcomes the worker, then, once
// released, ends the stream with an Abort (a server that lost another worker) or with an
// error (a server that died).
class ScriptedServer {
 public:
  ScriptedServer(int index, bool abort)
      : service_([this, index, abort](grpc::ServerContext*, RawTrainServerStream* stream) {
          grpc::ByteBuffer hello;
          if (!stream->Read(&hello)) return grpc::Status::CANCELLED;
          wire::ServerMessage welcome;
          welcome.mutable_welcome()->set_server_index(index);
          stream->Write(EncodeMessage(welcome));
          release_.WaitForNotification();
          if (!abort) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server died");
          wire::ServerMessage m;
          m.mutable_abort()->set_code(static_cast<int>(absl::StatusCode::kUnavailable));
          m.mutable_abort()->set_message("worker 1: worker 1 disconnected before it was done");
          stream->Write(EncodeMessage(m));
          return grpc::Status::OK;
        }) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~ScriptedServer() {
    Release();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  absl::Notification release_;
  RawTrainService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

CATCH_TEST_CASE("a worker names its own lost server, not another server's Abort that followed") {
  // Server 0 aborts the run (it lost worker 1, which had lost server 1); a moment later
  // this worker's own stream to server 1 breaks. The cause reported is server 1.
  ScriptedServer aborting(0, /*abort=*/true), dying(1, /*abort=*/false);
  WorkerOptions wo;
  wo.servers = {aborting.address(), dying.address()};
  wo.peer_timeout = absl::Seconds(30);
  wo.abort_grace = absl::Seconds(20);  // far beyond the 50 ms between the two
  auto model = MakeModel(1);
  auto worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  aborting.Release();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  dying.Release();
  auto [x, y] = GlobalBatch(0, 1);
  absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x);
  CATCH_REQUIRE_FALSE(out.ok());
  const std::string message(out.status().message());
  CATCH_CAPTURE(message);
  CATCH_CHECK(absl::StartsWith(message, "server 1 ("));
  CATCH_CHECK(absl::StrContains(message, "server died"));
  CATCH_CHECK(absl::StrContains(
      message, "(then server 0 aborted the run: worker 1: worker 1 disconnected before it was "
               "done, which follows from it)"));
  worker->reset();
}

CATCH_TEST_CASE("a server's Abort is reported once no failure of the worker's own follows") {
  ScriptedServer aborting(0, /*abort=*/true), alive(1, /*abort=*/false);
  WorkerOptions wo;
  wo.servers = {aborting.address(), alive.address()};
  wo.peer_timeout = absl::Seconds(30);
  wo.abort_grace = absl::Milliseconds(100);
  auto model = MakeModel(1);
  auto worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  aborting.Release();
  auto [x, y] = GlobalBatch(0, 1);
  absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x);
  CATCH_REQUIRE_FALSE(out.ok());
  CATCH_CHECK(absl::IsUnavailable(out.status()));
  CATCH_CHECK(out.status().message() ==
              "server 0 aborted the run: worker 1: worker 1 disconnected before it was done");
  worker->reset();
}

CATCH_TEST_CASE("a timed-out wait stays the worker's error; a server's Abort after it is a follow-on") {
  // Worker 1 of 2 waits for values that never come (its peer stalled): its wait times out
  // first. Then the server aborts the run, as a server that lost the stalled worker does.
  // Every later call reports the timeout, which names the wait, not the Abort.
  ScriptedServer aborting(0, /*abort=*/true);
  WorkerOptions wo;
  wo.servers = {aborting.address()};
  wo.num_workers = 2;
  wo.rank = 1;
  wo.peer_timeout = absl::Seconds(1);
  wo.abort_grace = absl::Milliseconds(100);
  auto model = MakeModel(1);
  auto worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  auto [x, y] = GlobalBatch(1, 2);
  absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x);
  CATCH_REQUIRE(absl::IsDeadlineExceeded(out.status()));
  const std::string timeout(out.status().message());
  CATCH_CAPTURE(timeout);
  CATCH_CHECK(absl::StartsWith(timeout, "worker 1: waited 1s for parameters"));
  aborting.Release();
  // Before, each call waited anew and the Abort arrived meanwhile, replacing the cause.
  for (const absl::Status& later : {(*worker)->Sync(), (*worker)->Finish()}) {
    CATCH_CHECK(absl::IsDeadlineExceeded(later));
    CATCH_CHECK(later.message() == timeout);
  }
  worker->reset();
}

CATCH_TEST_CASE("a server that goes away fails the workers instead of hanging them") {
  ServerOptions so;
  so.shard.num_workers = 1;
  auto server = ParameterServer::Start(so);
  CATCH_REQUIRE(server.ok());
  WorkerOptions wo;
  wo.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
  wo.peer_timeout = absl::Seconds(30);
  auto model = MakeModel(1);
  auto worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  CATCH_REQUIRE((*worker)->Sync().ok());
  (*server)->Shutdown();
  auto [x, y] = GlobalBatch(0, 1);
  absl::Status s = absl::OkStatus();
  // The server's end of the stream is gone; within two iterations the worker knows.
  for (int i = 0; i < 2 && s.ok(); ++i) {
    auto out = (*worker)->Forward(x);
    s = out.ok() ? (*worker)->Backward(model->Loss(*out, y)) : out.status();
  }
  CATCH_CHECK_FALSE(s.ok());
  CATCH_CHECK_FALSE(absl::IsDeadlineExceeded(s));  // told, not timed out
}

}  // namespace
}  // namespace p3::cluster_test
