// What a cluster refuses at the start and in the first step, naming the difference: a
// worker whose wire dtype, model, slice plan or cluster size differ from the server's, a
// model with a parameter outside its blocks, a parameter that receives no gradient.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "p3/core/slice_plan.h"
#include "p3/core/wire_dtype.h"
#include "server/parameter_server.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/test_mlp.h"
#include "worker/worker.h"

namespace p3::cluster_test {
namespace {

CATCH_TEST_CASE("a worker whose wire dtype differs from the server's is refused at the Hello") {
  ServerOptions so;
  so.shard.wire_dtype = WireDType::kBFloat16;
  auto server = ParameterServer::Start(so);
  CATCH_REQUIRE(server.ok());
  WorkerOptions wo;
  wo.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
  wo.peer_timeout = absl::Seconds(10);
  wo.wire_dtype = WireDType::kFloat16;
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, MakeModel(1));
  CATCH_CHECK(absl::IsFailedPrecondition(worker.status()));
  CATCH_CHECK(absl::StrContains(worker.status().message(),
                                "uses scheduling.wire_dtype float16; this server is configured "
                                "for bfloat16"));
  // float32 against it too.
  wo.wire_dtype = WireDType::kFloat32;
  worker = Worker::Create(wo, MakeModel(1));
  CATCH_CHECK(absl::IsFailedPrecondition(worker.status()));
  (*server)->Shutdown();
}

CATCH_TEST_CASE("a worker whose model does not match is refused with the difference named") {
  ServerOptions so;
  so.shard.num_workers = 2;
  auto server = ParameterServer::Start(so);
  CATCH_REQUIRE(server.ok());
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  WorkerOptions wo;
  wo.servers = {address};
  wo.num_workers = 2;
  wo.peer_timeout = absl::Seconds(10);
  auto first = Worker::Create(wo, MakeModel(1));
  CATCH_REQUIRE(first.ok());

  // Same rank again.
  auto twice = Worker::Create(wo, MakeModel(1));
  CATCH_CHECK(absl::IsAlreadyExists(twice.status()));

  // A different slice size changes the plan.
  wo.rank = 1;
  wo.slice_params = 123;
  auto other_plan = Worker::Create(wo, MakeModel(1));
  CATCH_REQUIRE(absl::IsFailedPrecondition(other_plan.status()));
  CATCH_CHECK(other_plan.status().message().find("slice plan") != std::string::npos);

  // A cluster of a different size.
  wo.slice_params = kDefaultSliceParams;
  wo.num_workers = 3;
  auto other_size = Worker::Create(wo, MakeModel(1));
  CATCH_REQUIRE(absl::IsFailedPrecondition(other_size.status()));
  CATCH_CHECK(other_size.status().message().find("3 workers") != std::string::npos);
  (*server)->Shutdown();
}

CATCH_TEST_CASE("a model with a parameter outside its blocks is refused, naming it") {
  torch::manual_seed(1);
  auto model = std::make_shared<TestMlp>();
  model->register_parameter("stray", torch::zeros({3}));
  WorkerOptions wo;
  wo.servers = {"127.0.0.1:1"};  // refused before connecting
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, model);
  CATCH_CHECK(absl::IsInvalidArgument(worker.status()));
  CATCH_CHECK(absl::StrContains(worker.status().message(), "stray"));
}

// TestMlp with a parameter in its last block that the forward pass never uses.
class MlpWithUnused : public TestMlp {
 public:
  MlpWithUnused() { unused_ = register_parameter("unused", torch::zeros({4})); }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override {
    std::vector<torch::Tensor> params = TestMlp::BlockParameters(i);
    if (i == num_blocks() - 1) params.push_back(unused_);
    return params;
  }

 private:
  torch::Tensor unused_;
};

CATCH_TEST_CASE("a parameter that receives no gradient ends the run with an error naming it") {
  torch::set_num_threads(1);
  ServerOptions so;
  so.shard.num_workers = 1;
  auto server = ParameterServer::Start(so);
  CATCH_REQUIRE(server.ok());
  WorkerOptions wo;
  wo.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
  wo.peer_timeout = absl::Seconds(30);
  torch::manual_seed(1);
  auto model = std::make_shared<MlpWithUnused>();
  auto worker = Worker::Create(wo, model);
  CATCH_REQUIRE(worker.ok());
  auto [x, y] = GlobalBatch(0, 1);
  absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x);
  CATCH_REQUIRE(out.ok());
  const absl::Status s = (*worker)->Backward(model->Loss(*out, y));
  CATCH_CHECK(absl::IsFailedPrecondition(s));
  CATCH_CAPTURE(s.ToString());
  CATCH_CHECK(absl::StrContains(s.message(), "parameter unused (fc3/2) received no gradient"));
  worker->reset();
  (*server)->Shutdown();
}

}  // namespace
}  // namespace p3::cluster_test
