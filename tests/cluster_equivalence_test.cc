// End to end over real gRPC on loopback: W workers and S in-process servers on
// OS-chosen ports must train the same parameters as the plain libtorch loop (`local`)
// on the union of the workers' batches, in every mode.
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "models/model.h"
#include "server/parameter_server.h"
#include "worker/worker.h"

#include <catch2/catch.hpp>

namespace p3 {
namespace {

constexpr int64_t kBatch = 4;       // per worker
constexpr int64_t kSliceParams = 50;
constexpr int kSteps = 4;

// A small model whose tensors are both larger (weights) and smaller (biases) than a slice.
class TestMlp : public models::BlockModel {
 public:
  TestMlp() {
    fc1_ = register_module("fc1", torch::nn::Linear(12, 40));
    fc2_ = register_module("fc2", torch::nn::Linear(40, 30));
    fc3_ = register_module("fc3", torch::nn::Linear(30, 5));
  }
  int64_t num_blocks() const override { return 3; }
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    if (i == 0) return torch::tanh(fc1_->forward(x));
    if (i == 1) return torch::tanh(fc2_->forward(x));
    return fc3_->forward(x);
  }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override {
    torch::nn::Linear l = i == 0 ? fc1_ : i == 1 ? fc2_ : fc3_;
    return {l->weight, l->bias};
  }
  std::string BlockName(int64_t i) const override { return "fc" + std::to_string(i + 1); }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

std::shared_ptr<TestMlp> MakeModel(uint64_t seed) {
  torch::manual_seed(seed);
  return std::make_shared<TestMlp>();
}

// The global batch of step `step`: rows [r*kBatch, (r+1)*kBatch) belong to worker r.
std::pair<torch::Tensor, torch::Tensor> GlobalBatch(int step, int workers) {
  torch::manual_seed(1000 + step);
  return {torch::randn({kBatch * workers, 12}), torch::randint(0, 5, {kBatch * workers})};
}

OptimizerOptions Sgd() {
  OptimizerOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 0.01;
  return o;
}

torch::Tensor Flatten(TestMlp& model) {
  std::vector<torch::Tensor> parts;
  for (auto& [name, p] : model.OrderedParameters()) parts.push_back(p.detach().reshape(-1));
  return torch::cat(parts);
}

// The reference: plain libtorch training on the union of the batches.
torch::Tensor TrainLocal(int workers) {
  auto model = MakeModel(1);
  const OptimizerOptions o = Sgd();
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(o.lr)
                                                 .momentum(o.momentum)
                                                 .weight_decay(o.weight_decay));
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = GlobalBatch(step, workers);
    opt.zero_grad();
    model->Loss(model->forward(x), y).backward();
    opt.step();
  }
  return Flatten(*model);
}

struct ClusterResult {
  std::vector<torch::Tensor> params;  // per worker
  std::vector<absl::Status> status;
};

ClusterResult TrainCluster(Mode mode, int workers, int servers) {
  std::vector<std::unique_ptr<ParameterServer>> ps;
  std::vector<std::string> addresses;
  for (int s = 0; s < servers; ++s) {
    ServerOptions so;
    so.shard.server_index = s;
    so.shard.num_workers = workers;
    so.shard.optimizer = Sgd();
    auto server = ParameterServer::Start(so);
    CATCH_REQUIRE(server.ok());
    addresses.push_back("127.0.0.1:" + std::to_string((*server)->port()));
    ps.push_back(*std::move(server));
  }
  ClusterResult result;
  result.params.resize(workers);
  result.status.resize(workers);
  // libtorch's generator is global: draw every batch and model before the threads start.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int step = 0; step < kSteps; ++step) batches.push_back(GlobalBatch(step, workers));
  std::vector<std::shared_ptr<TestMlp>> models;
  // Ranks other than 0 start from different values: the servers must hand out rank 0's.
  for (int r = 0; r < workers; ++r) models.push_back(MakeModel(r == 0 ? 1 : 77 + r));
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      std::shared_ptr<TestMlp> model = models[r];
      WorkerOptions wo;
      wo.servers = addresses;
      wo.rank = r;
      wo.num_workers = workers;
      wo.mode = mode;
      wo.slice_params = kSliceParams;
      wo.split_threshold = 1000;  // fc2's weight (1200) is split over the servers
      wo.peer_timeout = absl::Seconds(30);
      auto worker = Worker::Create(wo, model);
      if (!worker.ok()) {
        result.status[r] = worker.status();
        return;
      }
      for (int step = 0; step < kSteps; ++step) {
        const auto& [x, y] = batches[step];
        auto out = (*worker)->Forward(x.narrow(0, r * kBatch, kBatch));
        if (!out.ok()) {
          result.status[r] = out.status();
          return;
        }
        absl::Status s = (*worker)->Backward(model->Loss(*out, y.narrow(0, r * kBatch, kBatch)));
        if (!s.ok()) {
          result.status[r] = s;
          return;
        }
      }
      result.status[r] = (*worker)->Finish();
      result.params[r] = Flatten(*model).clone();
    });
  }
  for (auto& t : threads) t.join();
  for (auto& server : ps) CATCH_CHECK(server->Wait().ok());
  return result;
}

double RelativeError(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

CATCH_TEST_CASE("every mode trains the same parameters as local on the union of the batches") {
  torch::set_num_threads(1);
  double worst = 0;
  for (Mode mode : {Mode::kP3, Mode::kBaseline, Mode::kSlicingOnly, Mode::kPriorityOnly,
                    Mode::kNoOverlap}) {
    for (int workers : {1, 2, 3}) {
      const torch::Tensor want = TrainLocal(workers);
      for (int servers : {1, 2}) {
        CATCH_CAPTURE(ModeName(mode), workers, servers);
        ClusterResult got = TrainCluster(mode, workers, servers);
        for (int r = 0; r < workers; ++r) {
          CATCH_CAPTURE(r, got.status[r].ToString());
          CATCH_REQUIRE(got.status[r].ok());
          const double error = RelativeError(got.params[r], want);
          worst = std::max(worst, error);
          CATCH_CHECK(error <= 1e-5);
        }
      }
    }
  }
  std::cout << "largest relative error against local over all runs: " << worst << "\n";
}

CATCH_TEST_CASE("the trained parameters actually move away from the initial ones") {
  torch::set_num_threads(1);
  const torch::Tensor initial = Flatten(*MakeModel(1));
  ClusterResult got = TrainCluster(Mode::kP3, 2, 2);
  CATCH_REQUIRE(got.status[0].ok());
  CATCH_CHECK(RelativeError(got.params[0], initial) > 1e-3);
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
  (*server)->Shutdown();
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
}  // namespace p3
