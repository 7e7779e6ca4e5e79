#include "tests/cluster/cluster_fixture.h"

#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "p3/core/checkpoint.h"
#include "p3/core/lr_schedule.h"
#include "server/parameter_server.h"
#include "tests/cluster/test_mlp.h"

namespace p3::cluster_test {
namespace {

// Warm-up over 2 iterations from 1/4, then cosine to 0.01 over the 4 steps of a run:
// every iteration has a rate of its own.
LrScheduleOptions WarmCosine() {
  LrScheduleOptions s;
  s.kind = LrScheduleKind::kCosine;
  s.t_max = kSteps;
  s.eta_min = 0.01;
  s.warmup_iterations = 2;
  s.warmup_start_factor = 0.25;
  return s;
}

// The model's float32 buffers (BatchNorm's running statistics), flattened.
torch::Tensor FloatBuffers(models::BlockModel& model) {
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& b : model.buffers()) {
    if (b.scalar_type() == torch::kFloat32) parts.push_back(b.detach().flatten().clone());
  }
  return torch::cat(parts);
}

// The servers write checkpoints on their checkpoint writer threads (p3::CheckpointWriter),
// where Catch2's assertions are not safe: the outcomes are collected here and checked on the test's thread.
struct CheckpointWrites {
  absl::Mutex mu;
  std::vector<absl::Status> statuses ABSL_GUARDED_BY(mu);
};

}  // namespace

std::shared_ptr<models::BlockModel> MakeModel(uint64_t seed, ModelKind kind) {
  if (kind == ModelKind::kBatchNorm) return MakeTestBnMlp(seed);
  if (kind == ModelKind::kWide) return MakeTestWideMlp(seed);
  return MakeTestMlp(seed);
}

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

OptimizerOptions ScheduledSgd() {
  OptimizerOptions o = Sgd();
  o.schedule = WarmCosine();
  return o;
}

OptimizerOptions ScheduledAdam() {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01;
  o.weight_decay = 0.01;
  o.schedule.kind = LrScheduleKind::kStep;
  o.schedule.step_size = 2;
  o.schedule.gamma = 0.3;
  return o;
}

torch::Tensor Flatten(models::BlockModel& model) {
  std::vector<torch::Tensor> parts;
  for (auto& [name, p] : model.OrderedParameters()) parts.push_back(p.detach().reshape(-1));
  return torch::cat(parts);
}

torch::Tensor TrainLocal(int workers, const OptimizerOptions& o, ModelKind kind,
                         bool normalise_union) {
  auto model = MakeModel(1, kind);
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (o.kind == OptimizerKind::kAdam) {
    opt = std::make_unique<torch::optim::Adam>(model->parameters(),
                                               torch::optim::AdamOptions(o.lr)
                                                   .betas({o.beta1, o.beta2})
                                                   .eps(o.eps)
                                                   .weight_decay(o.weight_decay));
  } else {
    opt = std::make_unique<torch::optim::SGD>(
        model->parameters(),
        torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  }
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = GlobalBatch(step, workers);
    for (auto& group : opt->param_groups())
      group.options().set_lr(ScheduledLr(o.schedule, o.lr, step));
    opt->zero_grad();
    if (kind == ModelKind::kBatchNorm && !normalise_union) {
      torch::Tensor loss = torch::zeros({});
      for (int r = 0; r < workers; ++r) {
        loss = loss + model->Loss(model->forward(x.narrow(0, r * kBatch, kBatch)),
                                  y.narrow(0, r * kBatch, kBatch));
      }
      (loss / workers).backward();
    } else {
      model->Loss(model->forward(x), y).backward();
    }
    opt->step();
  }
  return Flatten(*model);
}

ClusterResult TrainCluster(const RunSpec& spec) {
  const int workers = spec.workers;
  auto checkpoint_writes = std::make_shared<CheckpointWrites>();
  std::vector<std::unique_ptr<ParameterServer>> ps;
  std::vector<std::string> addresses;
  for (int s = 0; s < spec.servers; ++s) {
    ServerOptions so;
    so.shard.server_index = s;
    so.shard.num_workers = workers;
    so.shard.optimizer = spec.optimizer;
    so.max_message_params = spec.max_message_params;
    so.shard.wire_dtype = spec.wire_dtype;
    const std::string dir = spec.checkpoint_dir + "/server_" + std::to_string(s);
    if (spec.checkpoint_every > 0) {
      so.shard.checkpoint_every = spec.checkpoint_every;
      so.shard.on_checkpoint = [dir, checkpoint_writes](ShardCheckpoint c) {
        absl::Status written = WriteCheckpoint(c, dir);
        absl::MutexLock lock(&checkpoint_writes->mu);
        checkpoint_writes->statuses.push_back(std::move(written));
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
  ClusterResult result;
  result.params.resize(workers);
  result.buffers_before.resize(workers);
  result.buffers_after.resize(workers);
  result.status.resize(workers);
  result.stats.resize(workers);
  result.replans.resize(workers);
  result.final_slice_params.resize(workers);
  // libtorch's generator is global: draw every batch and model before the threads start.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int step = 0; step < spec.steps; ++step) batches.push_back(GlobalBatch(step, workers));
  std::vector<std::shared_ptr<models::BlockModel>> models;
  // Ranks other than 0 start from different values: the servers must hand out rank 0's.
  for (int r = 0; r < workers; ++r) models.push_back(MakeModel(r == 0 ? 1 : 77 + r, spec.model));
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      std::shared_ptr<models::BlockModel> model = models[r];
      WorkerOptions wo;
      wo.servers = addresses;
      wo.rank = r;
      wo.num_workers = workers;
      wo.mode = spec.mode;
      wo.slice_params = spec.slice_params;
      wo.split_threshold = 1000;  // fc2's weight (1200) is split over the servers
      wo.peer_timeout = absl::Seconds(30);
      wo.max_message_params = spec.max_message_params;
      wo.wire_dtype = spec.wire_dtype;
      wo.owner_params = spec.owner_params;
      wo.pack_params = spec.pack_params;
      if (spec.shared_memory && r < spec.servers) wo.shared_memory_servers = {r};
      auto worker = Worker::Create(wo, model);
      if (!worker.ok()) {
        result.status[r] = worker.status();
        return;
      }
      for (int64_t step = (*worker)->iteration(); step < spec.steps; ++step) {
        for (const auto& [before, size] : spec.replans) {
          if (r != 0 || before != step) continue;
          // A refusal changes nothing: the run goes on in its plan.
          absl::StatusOr<uint64_t> from = (*worker)->RequestReplan(size);
          if (!from.ok()) result.replan_status = from.status();
        }
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
      if (spec.average_buffers) {
        result.buffers_before[r] = FloatBuffers(*model);
        if (absl::Status s = (*worker)->AverageBuffers(); !s.ok()) {
          result.status[r] = s;
          return;
        }
        result.buffers_after[r] = FloatBuffers(*model);
      }
      if (spec.finish) result.status[r] = (*worker)->Finish();
      result.stats[r] = (*worker)->stats();
      result.replans[r] = (*worker)->replans();
      result.final_slice_params[r] = (*worker)->plan().options().slice_params;
      result.params[r] = Flatten(*model).clone();
    });
  }
  for (auto& t : threads) t.join();
  const bool workers_ok = std::all_of(result.status.begin(), result.status.end(),
                                      [](const absl::Status& s) { return s.ok(); });
  for (auto& server : ps) {
    if (spec.finish) {
      result.server_status.push_back(server->Wait());
      if (workers_ok) CATCH_CHECK(result.server_status.back().ok());
    } else {
      server->Shutdown();  // the crash: nobody finishes
    }
  }
  ps.clear();  // no handler thread runs any more
  absl::MutexLock lock(&checkpoint_writes->mu);
  if (spec.checkpoint_every > 0 && workers_ok) {
    CATCH_CHECK_FALSE(checkpoint_writes->statuses.empty());
  }
  for (const absl::Status& written : checkpoint_writes->statuses) {
    CATCH_CAPTURE(written.ToString());
    CATCH_CHECK(written.ok());
  }
  return result;
}

ClusterResult TrainCluster(Mode mode, int workers, int servers) {
  return TrainCluster(RunSpec{.mode = mode, .workers = workers, .servers = servers});
}

double RelativeError(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

std::vector<Mode> ClusterModes() {
  std::vector<Mode> modes;
  for (const char* name : kModeNames) {
    const Mode mode = *ParseMode(name);
    if (mode != Mode::kLocal) modes.push_back(mode);
  }
  return modes;
}

}  // namespace p3::cluster_test
