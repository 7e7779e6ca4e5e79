// The Worker's step-wise API (WaitForBlock, ArmGradients, a backward pass run by the
// caller, EndIteration; worker/worker.h), as the Python front end drives it, over the
// in-memory transport: a worker driven this way through an ExternalBlockModel
// (models/external_block_model.h) trains bit for bit what Forward/Backward train, in
// modes with and without overlap; a step without a gradient is refused and the run goes
// on; a second backward pass ends the run naming the parameter.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/external_block_model.h"
#include "p3/core/mode.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/cluster/test_mlp.h"
#include "worker/in_memory_transport.h"
#include "worker/worker.h"

namespace p3 {
namespace {

using cluster_test::Flatten;
using cluster_test::GlobalBatch;
using cluster_test::kBatch;
using cluster_test::kSteps;
using cluster_test::Sgd;

// The test MLP's tensors as an ExternalBlockModel, the way worker/python/ describes a
// PyTorch module.
std::shared_ptr<models::ExternalBlockModel> External(TestMlp& mlp) {
  std::vector<models::ExternalBlockModel::Block> blocks;
  for (int64_t b = 0; b < mlp.num_blocks(); ++b) {
    const std::string name = mlp.BlockName(b);
    blocks.push_back({name, {name + ".weight", name + ".bias"}, mlp.BlockParameters(b)});
  }
  absl::StatusOr<std::shared_ptr<models::ExternalBlockModel>> model =
      models::ExternalBlockModel::Create(blocks, {}, {});
  CATCH_REQUIRE(model.ok());
  return *model;
}

// One iteration the step-wise way: the caller runs the blocks and the backward pass.
absl::Status Step(Worker& worker, TestMlp& mlp, const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor h = x;
  for (int64_t b = 0; b < mlp.num_blocks(); ++b) {
    if (absl::Status s = worker.WaitForBlock(b); !s.ok()) return s;
    h = mlp.ForwardBlock(b, h);
  }
  if (absl::Status s = worker.ArmGradients(); !s.ok()) return s;
  mlp.Loss(h, y).backward();
  return worker.EndIteration();
}

struct Run {
  std::vector<torch::Tensor> params;
  std::vector<absl::Status> status;
};

// Two workers on two in-memory servers, kSteps iterations; worker r is driven step-wise
// when stepwise[r].
Run Train(Mode mode, std::vector<bool> stepwise) {
  const int workers = static_cast<int>(stepwise.size());
  std::vector<std::unique_ptr<InMemoryServer>> servers;
  std::vector<InMemoryServer*> links;
  for (int s = 0; s < 2; ++s) {
    ShardOptions shard;
    shard.server_index = s;
    shard.num_workers = workers;
    shard.optimizer = Sgd();
    servers.push_back(std::make_unique<InMemoryServer>(shard));
    links.push_back(servers.back().get());
  }
  Run run;
  run.params.resize(workers);
  run.status.resize(workers);
  std::vector<std::shared_ptr<TestMlp>> mlps;
  for (int r = 0; r < workers; ++r) mlps.push_back(MakeTestMlp(r == 0 ? 1 : 77 + r));
  // Drawn here, not in the workers' threads: GlobalBatch seeds libtorch's global
  // generator, which two threads drawing at once would interleave (different batches, and
  // results that differ from run to run).
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int step = 0; step < kSteps; ++step) batches.push_back(GlobalBatch(step, workers));
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      TestMlp& mlp = *mlps[r];
      WorkerOptions wo;
      wo.servers = {"memory:0", "memory:1"};
      wo.rank = r;
      wo.num_workers = workers;
      wo.mode = mode;
      wo.slice_params = 50;
      wo.split_threshold = 1000;
      wo.peer_timeout = absl::Seconds(30);
      wo.transport_factory = InMemoryTransportFactory(links);
      std::shared_ptr<models::BlockModel> model = mlps[r];
      if (stepwise[r]) model = External(mlp);
      absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, model);
      absl::Status& status = run.status[r];
      if (!worker.ok()) {
        status = worker.status();
        return;
      }
      for (int step = 0; step < kSteps && status.ok(); ++step) {
        const auto& [gx, gy] = batches[step];
        const torch::Tensor x = gx.narrow(0, r * kBatch, kBatch);
        const torch::Tensor y = gy.narrow(0, r * kBatch, kBatch);
        if (stepwise[r]) {
          status = Step(**worker, mlp, x, y);
        } else {
          absl::StatusOr<torch::Tensor> out = (*worker)->Forward(x);
          status = out.ok() ? (*worker)->Backward(mlp.Loss(*out, y)) : out.status();
        }
      }
      if (status.ok()) status = (*worker)->Finish();
      run.params[r] = Flatten(mlp);
    });
  }
  for (std::thread& t : threads) t.join();
  for (auto& server : servers) CATCH_CHECK(server->Wait().ok());
  return run;
}

CATCH_TEST_CASE("step-wise workers train bit for bit what Forward and Backward train") {
  torch::set_num_threads(1);
  for (Mode mode :
       {Mode::kP3, Mode::kBaseline, Mode::kNoForwardOverlap, Mode::kNoBackwardOverlap}) {
    CATCH_CAPTURE(ModeName(mode));
    const Run want = Train(mode, {false, false});
    for (const std::vector<bool>& stepwise :
         {std::vector<bool>{true, true}, std::vector<bool>{true, false}}) {
      const Run got = Train(mode, stepwise);
      for (int r = 0; r < 2; ++r) {
        CATCH_CAPTURE(r, stepwise[1], got.status[r].ToString());
        CATCH_REQUIRE(got.status[r].ok());
        CATCH_CHECK(torch::equal(got.params[r], want.params[r]));
      }
    }
    // Trained: the parameters left rank 0's initial values.
    CATCH_CHECK(!torch::equal(want.params[0], Flatten(*MakeTestMlp(1))));
  }
}

// One worker on one in-memory server, driven by `body`; returns what it returned.
absl::Status Alone(const std::function<absl::Status(Worker&, TestMlp&)>& body) {
  ShardOptions shard;
  shard.num_workers = 1;
  shard.optimizer = Sgd();
  InMemoryServer server(shard);
  std::shared_ptr<TestMlp> mlp = MakeTestMlp(1);
  WorkerOptions wo;
  wo.servers = {"memory:0"};
  wo.slice_params = 50;
  wo.peer_timeout = absl::Seconds(30);
  wo.transport_factory = InMemoryTransportFactory({&server});
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, External(*mlp));
  CATCH_REQUIRE(worker.ok());
  const absl::Status status = body(**worker, *mlp);
  if (status.ok()) CATCH_CHECK((*worker)->Finish().ok());
  return status;
}

CATCH_TEST_CASE("a step without a gradient is refused and the run goes on") {
  torch::set_num_threads(1);
  const auto [x, y] = GlobalBatch(0, 1);
  const absl::Status status = Alone([&, x = x, y = y](Worker& worker, TestMlp& mlp) {
    const absl::Status early = worker.EndIteration();
    CATCH_CHECK(absl::IsFailedPrecondition(early));
    CATCH_CHECK(absl::StrContains(early.message(), "iteration 0 has no gradient yet"));
    CATCH_CHECK(worker.iteration() == 0);
    CATCH_CHECK(absl::IsOutOfRange(worker.WaitForBlock(3)));
    absl::Status s = Step(worker, mlp, x, y);
    CATCH_CHECK(worker.iteration() == 1);
    return s;
  });
  CATCH_CHECK(status.ok());
}

CATCH_TEST_CASE("a second backward pass before the step ends the run naming the parameter") {
  torch::set_num_threads(1);
  const auto [x, y] = GlobalBatch(0, 1);
  const absl::Status status = Alone([&, x = x, y = y](Worker& worker, TestMlp& mlp) {
    for (int64_t b = 0; b < 3; ++b) CATCH_REQUIRE(worker.WaitForBlock(b).ok());
    CATCH_REQUIRE(worker.ArmGradients().ok());
    const torch::Tensor loss = mlp.Loss(mlp.forward(x), y);
    loss.backward({}, /*retain_graph=*/true);
    loss.backward();
    return worker.EndIteration();
  });
  CATCH_CAPTURE(status.ToString());
  CATCH_CHECK(absl::IsFailedPrecondition(status));
  // The module's own names (autograd reaches the last layer's bias first).
  CATCH_CHECK(absl::StrContains(status.message(), "parameter fc3.bias (fc3/1)"));
  CATCH_CHECK(absl::StrContains(status.message(), "received a second gradient in iteration 0"));
}

CATCH_TEST_CASE("an external model refuses a tensor given twice and a block without tensors") {
  std::shared_ptr<TestMlp> mlp = MakeTestMlp(1);
  const torch::Tensor w = mlp->BlockParameters(0)[0];
  absl::StatusOr<std::shared_ptr<models::ExternalBlockModel>> twice =
      models::ExternalBlockModel::Create({{"a", {"a.w"}, {w}}, {"b", {"b.w"}, {w}}}, {}, {});
  CATCH_CHECK(absl::IsInvalidArgument(twice.status()));
  CATCH_CHECK(absl::StrContains(twice.status().message(), "parameter b.w is given twice"));
  CATCH_CHECK(absl::IsInvalidArgument(
      models::ExternalBlockModel::Create({{"a", {}, {}}}, {}, {}).status()));
  CATCH_CHECK(absl::IsInvalidArgument(models::ExternalBlockModel::Create({}, {}, {}).status()));
}

}  // namespace
}  // namespace p3
