// Elastic membership end to end (docs/reliability.md, "Elastic membership"): in-process
// servers and worker threads over gRPC on loopback train the test MLP while the run goes
// from 2 to 3 workers at iteration 100 and back to 2 at iteration 200. The parameters
// must equal `local` trained on the same sequence of global batches (2, 3, then 2 workers'
// batches) with the same rate. With checkpoints, the same run stopped in its 3-worker
// span and resumed from the servers' checkpoints ends bit-identical to the uninterrupted
// one.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "p3/core/checkpoint.h"
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

// Checkpoints and the crash, as the fixture's RunSpec has them.
struct ElasticSpec {
  int steps = kIterations;     // train up to this iteration
  bool finish = true;          // false: the workers vanish after `steps`, as in a crash
  std::string checkpoint_dir;  // servers save to <dir>/server_<i> every checkpoint_every
  uint64_t checkpoint_every = 0;
  bool resume = false;  // servers start from their newest checkpoint, every rank present
                        // there starts as an ordinary worker
};

// Written on the servers' checkpoint threads, checked on the test's.
struct CheckpointWrites {
  absl::Mutex mu;
  std::vector<absl::Status> statuses ABSL_GUARDED_BY(mu);
};

ElasticRun RunElastic(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batches,
                      int servers, const ElasticSpec& spec = {}) {
  std::vector<std::unique_ptr<ParameterServer>> ps;
  std::vector<std::string> addresses;
  auto writes = std::make_shared<CheckpointWrites>();
  for (int s = 0; s < servers; ++s) {
    ServerOptions so;
    so.shard.server_index = s;
    so.shard.num_workers = 3;
    so.shard.initial_workers = 2;
    so.shard.optimizer = Sgd();
    const std::string dir = spec.checkpoint_dir + "/server_" + std::to_string(s);
    if (spec.checkpoint_every > 0) {
      so.shard.checkpoint_every = spec.checkpoint_every;
      so.shard.on_checkpoint = [dir, writes](ShardCheckpoint c) {
        absl::Status written = WriteCheckpoint(c, dir);
        absl::MutexLock lock(&writes->mu);
        writes->statuses.push_back(std::move(written));
      };
    }
    if (spec.resume) {
      auto restored = ReadLatestCheckpoint(dir, 0);
      CATCH_REQUIRE(restored.ok());
      so.shard.restore = *std::move(restored);
    }
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
    // Resumed: rank 2 is present at the checkpoint's iteration, not joining.
    const bool joins = r == 2 && !spec.resume;
    wo.elastic_join = joins;
    wo.slice_params = kSliceParams;
    wo.split_threshold = 1000;
    wo.peer_timeout = absl::Seconds(30);
    if (joins) start_joiner.WaitForNotification();
    auto worker = Worker::Create(wo, models[r]);
    if (joins) joiner_connected.Notify();
    if (!worker.ok()) {
      run.status[r] = worker.status();
      return;
    }
    Worker& w = **worker;
    while (w.iteration() < spec.steps) {
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
    if (spec.finish) run.status[r] = w.Finish();
    run.params[r] = Flatten(*models[r]).clone();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) threads.emplace_back(train, r);
  for (auto& t : threads) t.join();
  for (auto& server : ps) {
    if (spec.finish) {
      CATCH_CHECK(server->Wait().ok());
    } else {
      server->Shutdown();  // the crash: nobody finishes
    }
  }
  ps.clear();  // no checkpoint thread runs any more
  absl::MutexLock lock(&writes->mu);
  for (const absl::Status& written : writes->statuses) CATCH_CHECK(written.ok());
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

CATCH_TEST_CASE(
    "an elastic run with checkpoints, stopped in its 3-worker span and resumed, ends "
    "bit-identical to the uninterrupted run") {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int step = 0; step < kIterations; ++step) {
    batches.push_back(GlobalBatch(step, PresentCount(step)));
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/elastic_resume";
  CATCH_REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
  const ElasticRun whole = RunElastic(batches, /*servers=*/2);
  for (int r = 0; r < 3; ++r) CATCH_REQUIRE(whole.status[r].ok());

  // Checkpoints every 40 iterations; everything dies after iteration 169, rank 2 present.
  const ElasticRun crashed = RunElastic(
      batches, 2,
      ElasticSpec{.steps = 170, .finish = false, .checkpoint_dir = dir, .checkpoint_every = 40});
  CATCH_CHECK(crashed.first_iteration == std::vector<int64_t>{0, 0, kJoinAt});
  for (int s = 0; s < 2; ++s) {
    auto latest = ReadLatestCheckpoint(dir + "/server_" + std::to_string(s), 0);
    CATCH_REQUIRE(latest.ok());
    CATCH_CHECK(latest->iteration == 160);
    CATCH_REQUIRE(latest->membership.size() == 2);
    CATCH_CHECK(latest->membership[1].from_iteration == static_cast<uint64_t>(kJoinAt));
    CATCH_CHECK(latest->membership[1].present == std::vector<int>{0, 1, 2});
  }

  // A new cluster resumes at 160 with ranks 0, 1 and 2; rank 0 removes rank 2 at 200.
  const ElasticRun resumed = RunElastic(
      batches, 2, ElasticSpec{.checkpoint_dir = dir, .checkpoint_every = 40, .resume = true});
  CATCH_CHECK(resumed.request_status.ok());
  for (int r = 0; r < 3; ++r) {
    CATCH_CAPTURE(r, resumed.status[r].ToString());
    CATCH_CHECK(resumed.status[r].ok());
  }
  CATCH_CHECK(resumed.first_iteration == std::vector<int64_t>{160, 160, 160});
  CATCH_CHECK(resumed.left_at == std::vector<int64_t>{-1, -1, kLeaveAt});
  for (int r = 0; r < 2; ++r) {
    CATCH_CAPTURE(r);
    CATCH_REQUIRE(resumed.params[r].defined());
    CATCH_CHECK(torch::equal(resumed.params[r], whole.params[r]));  // bit for bit
  }
}

}  // namespace
}  // namespace p3::cluster_test
