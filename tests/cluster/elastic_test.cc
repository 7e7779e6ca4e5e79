// Elastic membership end to end (docs/reliability.md, "Elastic membership"): in-process
// servers and worker threads over gRPC on loopback train the test MLP while the run goes
// from 2 to 3 workers at iteration 100 and back to 2 at iteration 200. The parameters
// must equal `local` trained on the same sequence of global batches (2, 3, then 2 workers'
// batches) with the same rate.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "server/parameter_server.h"
#include "tests/cluster/cluster_fixture.h"
#include "worker/worker.h"

namespace p3::cluster_test {
namespace {

constexpr int kIterations = 300;
constexpr int kJoinAt = 100;   // rank 2 takes part from here
constexpr int kLeaveAt = 200;  // ... up to the iteration before this

// The workers present in `iteration`.
int PresentCount(int iteration) { return iteration >= kJoinAt && iteration < kLeaveAt ? 3 : 2; }

// The reference: one process trains on the union of the present workers' batches.
torch::Tensor TrainLocalElastic(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batches,
                                const OptimizerOptions& o) {
  auto model = MakeModel(1);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(o.lr)
                                                 .momentum(o.momentum)
                                                 .weight_decay(o.weight_decay));
  for (const auto& [x, y] : batches) {
    opt.zero_grad();
    model->Loss(model->forward(x), y).backward();
    opt.step();
  }
  return Flatten(*model);
}

struct ElasticRun {
  std::vector<torch::Tensor> params = std::vector<torch::Tensor>(3);
  std::vector<absl::Status> status = std::vector<absl::Status>(3);
  // The first iteration each rank trained, how many it trained, and the iteration it
  // found itself absent at (-1: none).
  std::vector<int64_t> first_iteration = std::vector<int64_t>(3, -1);
  std::vector<int64_t> iterations = std::vector<int64_t>(3, 0);
  std::vector<int64_t> left_at = std::vector<int64_t>(3, -1);
  absl::Status request_status;
};

ElasticRun RunElastic(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batches,
                      int servers) {
  std::vector<std::unique_ptr<ParameterServer>> ps;
  std::vector<std::string> addresses;
  for (int s = 0; s < servers; ++s) {
    ServerOptions so;
    so.shard.server_index = s;
    so.shard.num_workers = 3;
    so.shard.initial_workers = 2;
    so.shard.optimizer = Sgd();
    auto server = ParameterServer::Start(so);
    CATCH_REQUIRE(server.ok());
    addresses.push_back("127.0.0.1:" + std::to_string((*server)->port()));
    ps.push_back(*std::move(server));
  }
  ElasticRun run;
  // libtorch's generator is global: every model is made before the threads start.
  std::vector<std::shared_ptr<models::BlockModel>> models;
  for (int r = 0; r < 3; ++r) models.push_back(MakeModel(r == 0 ? 1 : 77 + r));
  absl::Notification start_joiner;      // rank 0 is mid-run
  absl::Notification joiner_connected;  // rank 2 has said Hello to every server
  auto train = [&](int r) {
    WorkerOptions wo;
    wo.servers = addresses;
    wo.rank = r;
    wo.num_workers = 3;
    wo.initial_workers = 2;
    wo.elastic_join = r == 2;
    wo.slice_params = kSliceParams;
    wo.split_threshold = 1000;
    wo.peer_timeout = absl::Seconds(30);
    if (r == 2) start_joiner.WaitForNotification();
    auto worker = Worker::Create(wo, models[r]);
    if (r == 2) joiner_connected.Notify();
    if (!worker.ok()) {
      run.status[r] = worker.status();
      return;
    }
    Worker& w = **worker;
    while (w.iteration() < kIterations) {
      const int64_t step = w.iteration();
      if (r == 0 && step == kIterations / 6) start_joiner.Notify();
      if (r == 0 && (step == kJoinAt - 1 || step == kLeaveAt - 1)) {
        if (step == kJoinAt - 1) joiner_connected.WaitForNotification();
        absl::StatusOr<uint64_t> from =
            w.RequestMembership(step == kJoinAt - 1 ? std::vector<int>{0, 1, 2}
                                                    : std::vector<int>{0, 1});
        if (!from.ok() || *from != static_cast<uint64_t>(step + 1)) {
          run.request_status = from.ok() ? absl::InternalError("wrong iteration") : from.status();
        }
      }
      absl::StatusOr<std::vector<int>> present = w.Present();
      if (!present.ok()) {
        run.status[r] = present.status();
        return;
      }
      const int64_t now = w.iteration();  // a joining worker's first one
      auto place = std::find(present->begin(), present->end(), r);
      if (place == present->end()) {
        run.left_at[r] = now;
        break;
      }
      if (run.first_iteration[r] < 0) run.first_iteration[r] = now;
      const int64_t row = (place - present->begin()) * kBatch;
      const auto& [x, y] = batches[now];
      auto out = w.Forward(x.narrow(0, row, kBatch));
      if (!out.ok()) {
        run.status[r] = out.status();
        return;
      }
      absl::Status s = w.Backward(models[r]->Loss(*out, y.narrow(0, row, kBatch)));
      if (!s.ok()) {
        run.status[r] = s;
        return;
      }
      ++run.iterations[r];
    }
    run.status[r] = w.Finish();
    run.params[r] = Flatten(*models[r]).clone();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) threads.emplace_back(train, r);
  for (auto& t : threads) t.join();
  for (auto& server : ps) CATCH_CHECK(server->Wait().ok());
  return run;
}

CATCH_TEST_CASE("a run that goes 2 -> 3 -> 2 workers equals local on the same batches") {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> fixed;  // 2 workers throughout
  for (int step = 0; step < kIterations; ++step) {
    batches.push_back(GlobalBatch(step, PresentCount(step)));
    fixed.push_back(GlobalBatch(step, 2));
  }
  const torch::Tensor want = TrainLocalElastic(batches, Sgd());
  // The test can tell: without the third worker's batches the result is another one.
  CATCH_CHECK(RelativeError(TrainLocalElastic(fixed, Sgd()), want) > 1e-3);

  const ElasticRun run = RunElastic(batches, /*servers=*/2);
  CATCH_CHECK(run.request_status.ok());
  for (int r = 0; r < 3; ++r) {
    CATCH_CAPTURE(r, run.status[r].ToString());
    CATCH_CHECK(run.status[r].ok());
  }
  CATCH_CHECK(run.first_iteration == std::vector<int64_t>{0, 0, kJoinAt});
  CATCH_CHECK(run.iterations ==
              std::vector<int64_t>{kIterations, kIterations, kLeaveAt - kJoinAt});
  CATCH_CHECK(run.left_at == std::vector<int64_t>{-1, -1, kLeaveAt});
  for (int r = 0; r < 2; ++r) {
    CATCH_REQUIRE(run.params[r].defined());
    CATCH_CAPTURE(r);
    const double error = RelativeError(run.params[r], want);
    std::cout << "worker " << r << ": relative error to local " << error << std::endl;
    CATCH_CHECK(error <= 1e-5);
  }
}

}  // namespace
}  // namespace p3::cluster_test
