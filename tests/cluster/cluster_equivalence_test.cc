// End to end over real gRPC on loopback: W workers and S in-process servers on
// OS-chosen ports must train the same parameters as the plain libtorch loop (`local`)
// on the union of the workers' batches, in every mode: with SGD, with Adam, with a
// learning-rate schedule (the rate set on libtorch's optimizer per iteration, as mode
// `local` does), and with a model that has batch normalisation.
#include <grpcpp/grpcpp.h>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <catch2/catch.hpp>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "models/model.h"
#include "p3/core/checkpoint.h"
#include "p3/core/lr_schedule.h"
#include "p3/core/mode.h"
#include "p3/core/optimizer.h"
#include "p3/core/slice_plan.h"
#include "p3/base/trace.h"
#include "p3/core/wire_dtype.h"
#include "proto/p3.pb.h"
#include "proto/raw_train.h"
#include "proto/wire_codec.h"
#include "server/parameter_server.h"
#include "tests/cluster/test_mlp.h"
#include "worker/worker.h"

namespace p3 {
namespace {

constexpr int64_t kBatch = 4;  // per worker
constexpr int64_t kSliceParams = 50;
constexpr int kSteps = 4;

// The model of a run: the plain MLP, or the one with batch normalisation.
enum class ModelKind { kMlp, kBatchNorm };

std::shared_ptr<models::BlockModel> MakeModel(uint64_t seed, ModelKind kind = ModelKind::kMlp) {
  if (kind == ModelKind::kBatchNorm) return MakeTestBnMlp(seed);
  return MakeTestMlp(seed);
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

// The reference: plain libtorch training on the union of the batches, with libtorch's
// optimizer at the scheduled rate of each iteration. With batch normalisation, each
// worker's rows are normalised on their own and the loss is the mean of the workers'.
// `normalise_union` instead runs one forward over the union (to show that it differs).
torch::Tensor TrainLocal(int workers, const OptimizerOptions& o = Sgd(),
                         ModelKind kind = ModelKind::kMlp, bool normalise_union = false) {
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

// The model's float32 buffers (BatchNorm's running statistics), flattened.
torch::Tensor FloatBuffers(models::BlockModel& model) {
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& b : model.buffers()) {
    if (b.scalar_type() == torch::kFloat32) parts.push_back(b.detach().flatten().clone());
  }
  return torch::cat(parts);
}

struct RunSpec {
  Mode mode = Mode::kP3;
  int workers = 1;
  int servers = 1;
  int steps = kSteps;          // train up to this iteration
  bool finish = true;          // false: the workers vanish after `steps`, as in a crash
  std::string checkpoint_dir;  // servers save to <dir>/server_<i> every checkpoint_every
  uint64_t checkpoint_every = 0;
  bool resume = false;  // servers start from their newest checkpoint
  // The most values per message, both directions (larger slices travel in parts).
  int64_t max_message_params = kDefaultMaxMessageParams;
  // Worker r and server r share a machine, as in a colocated cluster: their values go
  // through shared memory (false: every value over the streams).
  bool shared_memory = true;
  OptimizerOptions optimizer = Sgd();
  ModelKind model = ModelKind::kMlp;
  bool average_buffers = false;  // Worker::AverageBuffers() after the last step
  WireDType wire_dtype = WireDType::kFloat32;  // scheduling.wire_dtype, both sides
  int64_t owner_params = 0;                    // ownership stripes (WorkerOptions)
  // Re-plans rank 0 requests: (before iteration, slice_params).
  std::vector<std::pair<int64_t, int64_t>> replans;
};

struct ClusterResult {
  std::vector<torch::Tensor> params;  // per worker
  // The float32 buffers flattened, per worker, before and after AverageBuffers().
  std::vector<torch::Tensor> buffers_before;
  std::vector<torch::Tensor> buffers_after;
  std::vector<absl::Status> status;
  std::vector<WorkerStats> stats;
  std::vector<int> replans;  // per worker, that took effect
  std::vector<int64_t> final_slice_params;  // per worker
  absl::Status replan_status;               // the last refused RequestReplan of rank 0
};

// The servers write checkpoints on their checkpoint writer threads (p3::CheckpointWriter),
// where Catch2's assertions are not safe: the outcomes are collected here and checked on the test's thread.
struct CheckpointWrites {
  absl::Mutex mu;
  std::vector<absl::Status> statuses ABSL_GUARDED_BY(mu);
};

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
      wo.slice_params = kSliceParams;
      wo.split_threshold = 1000;  // fc2's weight (1200) is split over the servers
      wo.peer_timeout = absl::Seconds(30);
      wo.max_message_params = spec.max_message_params;
      wo.wire_dtype = spec.wire_dtype;
      wo.owner_params = spec.owner_params;
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
  for (auto& server : ps) {
    if (spec.finish) {
      CATCH_CHECK(server->Wait().ok());
    } else {
      server->Shutdown();  // the crash: nobody finishes
    }
  }
  ps.clear();  // no handler thread runs any more
  absl::MutexLock lock(&checkpoint_writes->mu);
  if (spec.checkpoint_every > 0) CATCH_CHECK_FALSE(checkpoint_writes->statuses.empty());
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

// Every cluster mode of p3/core/mode.h, so that a new one is covered when it is added.
std::vector<Mode> ClusterModes() {
  std::vector<Mode> modes;
  for (const char* name : kModeNames) {
    const Mode mode = *ParseMode(name);
    if (mode != Mode::kLocal) modes.push_back(mode);
  }
  return modes;
}

CATCH_TEST_CASE("every mode trains the same parameters as local on the union of the batches") {
  torch::set_num_threads(1);
  double worst = 0;
  const std::vector<Mode> modes = ClusterModes();
  CATCH_CHECK(modes.size() == 8);
  for (Mode mode : modes) {
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

CATCH_TEST_CASE("values through shared memory train bit for bit what values over the streams do") {
  torch::set_num_threads(1);
  for (Mode mode : {Mode::kP3, Mode::kBaseline, Mode::kValuesOnly}) {
    for (int servers : {1, 2}) {
      CATCH_CAPTURE(ModeName(mode), servers);
      ClusterResult streams = TrainCluster(
          RunSpec{.mode = mode, .workers = 3, .servers = servers, .shared_memory = false});
      ClusterResult shared =
          TrainCluster(RunSpec{.mode = mode, .workers = 3, .servers = servers});
      for (int r = 0; r < 3; ++r) {
        CATCH_CAPTURE(r, streams.status[r].ToString(), shared.status[r].ToString());
        CATCH_REQUIRE(streams.status[r].ok());
        CATCH_REQUIRE(shared.status[r].ok());
        CATCH_CHECK(torch::equal(shared.params[r], streams.params[r]));
        CATCH_CHECK(streams.stats[r].bytes_shared == 0);
        if (r < servers) {
          // Its own server's slices went through shared memory, the others' over a stream.
          CATCH_CHECK(shared.stats[r].bytes_shared > 0);
          if (servers == 1) CATCH_CHECK(shared.stats[r].bytes_sent == 0);
          if (servers == 1) CATCH_CHECK(shared.stats[r].bytes_received == 0);
          CATCH_CHECK(shared.stats[r].bytes_shared + shared.stats[r].bytes_sent +
                          shared.stats[r].bytes_received ==
                      streams.stats[r].bytes_sent + streams.stats[r].bytes_received);
        } else {
          CATCH_CHECK(shared.stats[r].bytes_shared == 0);  // no server on its machine
        }
      }
    }
  }
}

// Every cluster mode on 2 workers and 2 servers against `want`; returns the largest
// relative error.
double WorstErrorOverModes(const torch::Tensor& want, const OptimizerOptions& optimizer,
                           ModelKind model) {
  double worst = 0;
  for (Mode mode : ClusterModes()) {
    CATCH_CAPTURE(ModeName(mode));
    ClusterResult got = TrainCluster(
        RunSpec{.mode = mode, .workers = 2, .servers = 2, .optimizer = optimizer, .model = model});
    for (int r = 0; r < 2; ++r) {
      CATCH_CAPTURE(r, got.status[r].ToString());
      CATCH_REQUIRE(got.status[r].ok());
      const double error = RelativeError(got.params[r], want);
      worst = std::max(worst, error);
      CATCH_CHECK(error <= 1e-5);
    }
  }
  return worst;
}

CATCH_TEST_CASE("re-plans during a run train bit for bit what one plan trains, and equal local") {
  torch::set_num_threads(1);
  // Slices of 50 in stripes of 100; before iteration 1 rank 0 asks for 20 (from iteration
  // 2), before iteration 3 for 100 (from iteration 4).
  const std::vector<std::pair<int64_t, int64_t>> replans = {{1, 20}, {3, 100}};
  const torch::Tensor want = TrainLocal(2, ScheduledSgd());
  for (Mode mode : {Mode::kP3, Mode::kNoOverlap, Mode::kNoBackwardOverlap,
                    Mode::kNoForwardOverlap}) {
    for (int servers : {1, 2}) {
      for (bool shared : {true, false}) {
        CATCH_CAPTURE(ModeName(mode), servers, shared);
        RunSpec spec{.mode = mode, .workers = 2, .servers = servers, .steps = 6,
                     .shared_memory = shared, .optimizer = ScheduledSgd(), .owner_params = 100};
        ClusterResult fixed = TrainCluster(spec);
        spec.replans = replans;
        ClusterResult replanned = TrainCluster(spec);
        for (int r = 0; r < 2; ++r) {
          CATCH_CAPTURE(replanned.status[0].ToString(), replanned.status[1].ToString());
          CATCH_CAPTURE(r, fixed.status[r].ToString(), replanned.status[r].ToString());
          CATCH_REQUIRE(fixed.status[r].ok());
          CATCH_REQUIRE(replanned.status[r].ok());
          CATCH_CHECK(replanned.replans[r] == 2);
          CATCH_CHECK(replanned.final_slice_params[r] == 100);
          CATCH_CHECK(fixed.replans[r] == 0);
          CATCH_CHECK(torch::equal(replanned.params[r], fixed.params[r]));
        }
      }
    }
  }
  // The first 4 iterations, one re-plan among them, against local.
  ClusterResult short_run = TrainCluster(RunSpec{.mode = Mode::kP3, .workers = 2, .servers = 2,
                                                 .optimizer = ScheduledSgd(), .owner_params = 100,
                                                 .replans = {{1, 20}}});
  for (int r = 0; r < 2; ++r) {
    CATCH_CAPTURE(r, short_run.status[r].ToString());
    CATCH_REQUIRE(short_run.status[r].ok());
    CATCH_CHECK(short_run.replans[r] == 1);
    CATCH_CHECK(RelativeError(short_run.params[r], want) <= 1e-5);
  }
}

CATCH_TEST_CASE("re-plans keep Adam's moments and a bfloat16 wire bit for bit") {
  torch::set_num_threads(1);
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    RunSpec spec{.mode = Mode::kP3, .workers = 3, .servers = 2, .steps = 6,
                 .optimizer = ScheduledAdam(), .wire_dtype = dtype, .owner_params = 100};
    ClusterResult fixed = TrainCluster(spec);
    spec.replans = {{1, 100}, {3, 7}};
    ClusterResult replanned = TrainCluster(spec);
    for (int r = 0; r < 3; ++r) {
      CATCH_CAPTURE(replanned.status[1].ToString(), replanned.status[2].ToString());
      CATCH_CAPTURE(r, fixed.status[r].ToString(), replanned.status[r].ToString());
      CATCH_REQUIRE(fixed.status[r].ok());
      CATCH_REQUIRE(replanned.status[r].ok());
      CATCH_CHECK(replanned.final_slice_params[r] == 7);
      CATCH_CHECK(torch::equal(replanned.params[r], fixed.params[r]));
    }
  }
}

CATCH_TEST_CASE("a re-plan the run cannot take is refused with the reason named") {
  torch::set_num_threads(1);
  // Without ownership stripes, and in a mode that pulls: refused by the worker.
  ClusterResult no_stripes = TrainCluster(
      RunSpec{.mode = Mode::kP3, .workers = 2, .servers = 2, .replans = {{1, 20}}});
  CATCH_CHECK(no_stripes.replan_status.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(absl::StrContains(no_stripes.replan_status.message(), "ownership stripes"));
  CATCH_CHECK(no_stripes.status[0].ok());
  CATCH_CHECK(no_stripes.replans[1] == 0);
  ClusterResult pulls = TrainCluster(RunSpec{.mode = Mode::kSlicingOnly, .workers = 2,
                                             .servers = 2, .owner_params = 100,
                                             .replans = {{1, 20}}});
  CATCH_CHECK(pulls.replan_status.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(absl::StrContains(pulls.replan_status.message(), "values on the push"));
  CATCH_CHECK(pulls.status[0].ok());
}

CATCH_TEST_CASE("with a learning-rate schedule every mode equals local with the same schedule") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2, ScheduledSgd());
  // The schedule changes the result, so a server that ignored it would fail below.
  CATCH_CHECK(RelativeError(TrainLocal(2, Sgd()), want) > 1e-3);
  std::cout << "schedule (SGD, warm-up + cosine): largest relative error against local "
            << WorstErrorOverModes(want, ScheduledSgd(), ModelKind::kMlp) << "\n";
}

CATCH_TEST_CASE("with Adam and a step schedule every mode equals local") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2, ScheduledAdam());
  OptimizerOptions constant = ScheduledAdam();
  constant.schedule = LrScheduleOptions();
  CATCH_CHECK(RelativeError(TrainLocal(2, constant), want) > 1e-4);
  std::cout << "Adam + step schedule: largest relative error against local "
            << WorstErrorOverModes(want, ScheduledAdam(), ModelKind::kMlp) << "\n";
}

CATCH_TEST_CASE("with batch normalisation every mode equals local over per-worker batches") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2, ScheduledSgd(), ModelKind::kBatchNorm);
  // Normalising the union instead gives other parameters: the reference must be per worker.
  CATCH_CHECK(RelativeError(TrainLocal(2, ScheduledSgd(), ModelKind::kBatchNorm, true), want) >
              1e-4);
  std::cout << "batch normalisation: largest relative error against local "
            << WorstErrorOverModes(want, ScheduledSgd(), ModelKind::kBatchNorm) << "\n";
}

CATCH_TEST_CASE("every worker ends with the mean of the workers' batch-norm statistics") {
  torch::set_num_threads(1);
  for (const Mode mode : {Mode::kP3, Mode::kBaseline}) {
    for (const bool shared_memory : {true, false}) {
      CATCH_CAPTURE(ModeName(mode), shared_memory);
      ClusterResult run = TrainCluster(RunSpec{.mode = mode,
                                               .workers = 3,
                                               .servers = 2,
                                               .shared_memory = shared_memory,
                                               .model = ModelKind::kBatchNorm,
                                               .average_buffers = true});
      for (const absl::Status& s : run.status) {
        CATCH_CAPTURE(s.ToString());
        CATCH_REQUIRE(s.ok());
      }
      // Each worker's statistics follow its own batches: they differ before.
      CATCH_REQUIRE(run.buffers_before[0].numel() > 0);
      CATCH_CHECK_FALSE(torch::equal(run.buffers_before[0], run.buffers_before[1]));
      // After: the mean, summed in rank order, on every worker, bit for bit.
      const torch::Tensor want =
          ((run.buffers_before[0] + run.buffers_before[1]) + run.buffers_before[2]) / 3.0f;
      for (int r = 0; r < 3; ++r) {
        CATCH_CAPTURE(r);
        CATCH_CHECK(torch::equal(run.buffers_after[r], want));
      }
      // The parameters are not touched: still every worker's the same.
      CATCH_CHECK(torch::equal(run.params[0], run.params[2]));
    }
  }
}

CATCH_TEST_CASE("slices and tensors sent in parts train the same parameters as sent whole") {
  torch::set_num_threads(1);
  const torch::Tensor want = TrainLocal(2);
  // 7 values per message: every slice (50) and tensor (up to 1200 values, split over the
  // servers at 1000) travels in parts, the last one shorter, in both directions.
  for (Mode mode : {Mode::kP3, Mode::kBaseline, Mode::kPriorityOnly, Mode::kValuesOnly}) {
    CATCH_CAPTURE(ModeName(mode));
    ClusterResult got =
        TrainCluster(RunSpec{.mode = mode,
                             .workers = 2,
                             .servers = 2,
                             .max_message_params = 7,
                             .shared_memory = false});  // every value through the stream
    for (int r = 0; r < 2; ++r) {
      CATCH_CAPTURE(r, got.status[r].ToString());
      CATCH_REQUIRE(got.status[r].ok());
      CATCH_CHECK(RelativeError(got.params[r], want) <= 1e-5);
    }
  }
}

// --- The 16-bit wire (scheduling.wire_dtype). The reference is `local` training with the
// wire's rounding put in where the cluster has it: each step every worker's gradient is
// rounded to the wire dtype slice by slice (float16: scaled by its own slice's
// Float16Scale, as the worker sends it), the float32 master values are updated with the
// mean of those, and the model's weights are the master values rounded slice by slice
// (what the servers send down). The update is p3's own SliceOptimizer (the servers'
// arithmetic, checked against libtorch's optimizer in the float32 tests above): libtorch's
// differs from it in the last bit now and then, and a last-bit difference can move a value
// to the neighbouring 16-bit number, a relative step of 2^-8 (bfloat16) that would force a
// tolerance hiding real errors. With the same arithmetic the cluster must match exactly.
torch::Tensor TrainLocalOnWire(Mode mode, int workers, int servers, WireDType dtype,
                               const OptimizerOptions& o = Sgd()) {
  auto model = MakeModel(1);
  std::vector<torch::Tensor> params;
  std::vector<TensorEntry> entries;
  for (auto& [name, p] : model->OrderedParameters()) {
    params.push_back(p);
    entries.push_back({name, p.numel()});
  }
  SlicePlanOptions plan_options;
  plan_options.granularity = TraitsOf(mode).sliced ? Granularity::kSliced : Granularity::kTensor;
  plan_options.slice_params = kSliceParams;
  plan_options.split_threshold = 1000;  // as TrainCluster's workers
  plan_options.num_servers = servers;
  const SlicePlan plan = *SlicePlan::Create(entries, plan_options);
  // Rounds `in` slice by slice into `out`, as a sender of each slice does.
  auto round = [&](const std::vector<float>& in, std::vector<float>* out) {
    out->resize(in.size());
    for (const Slice& s : plan.slices()) {
      const int e = dtype == WireDType::kFloat16
                        ? Float16ScaleExponent(in.data() + s.offset, s.length)
                        : 0;
      RoundToWire(dtype, in.data() + s.offset, s.length, e, out->data() + s.offset);
    }
  };
  auto flat = [&](bool grads) {
    std::vector<float> out;
    for (const torch::Tensor& p : params) {
      torch::Tensor t = (grads ? p.grad() : p.detach()).contiguous().reshape(-1);
      out.insert(out.end(), t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    }
    return out;
  };
  auto set_weights = [&](const std::vector<float>& values) {
    torch::NoGradGuard no_grad;
    int64_t at = 0;
    for (torch::Tensor& p : params) {
      p.copy_(torch::from_blob(const_cast<float*>(values.data()) + at, p.sizes()));
      at += p.numel();
    }
  };
  std::vector<float> master = flat(false);
  std::vector<float> weights;
  const SliceOptimizer optimizer(o);
  std::vector<SliceOptimizerState> state(plan.slices().size());
  for (int step = 0; step < kSteps; ++step) {
    round(master, &weights);
    set_weights(weights);
    auto [x, y] = GlobalBatch(step, workers);
    std::vector<std::vector<float>> grads(workers);
    for (int r = 0; r < workers; ++r) {
      for (torch::Tensor& p : params) p.mutable_grad() = torch::Tensor();
      model->Loss(model->forward(x.narrow(0, r * kBatch, kBatch)), y.narrow(0, r * kBatch, kBatch))
          .backward();
      round(flat(true), &grads[r]);
    }
    for (const Slice& s : plan.slices()) {
      std::vector<const float*> ptrs;
      for (int r = 0; r < workers; ++r) ptrs.push_back(grads[r].data() + s.offset);
      optimizer.ApplyMean(master.data() + s.offset, ptrs.data(), workers, s.length,
                          &state[s.id], optimizer.LearningRate(step));
    }
  }
  round(master, &weights);
  return torch::tensor(weights);
}

CATCH_TEST_CASE("on a 16-bit wire the cluster trains bit for bit local with the wire's rounding") {
  torch::set_num_threads(1);
  struct Case {
    Mode mode;
    int workers;
    int servers;
  };
  const std::vector<Case> cases = {{Mode::kP3, 1, 1},       {Mode::kP3, 2, 2},
                                   {Mode::kBaseline, 2, 2}, {Mode::kValuesOnly, 2, 2}};
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    for (const Case& c : cases) {
      for (bool shared_memory : {false, true}) {
        CATCH_CAPTURE(WireDTypeName(dtype), ModeName(c.mode), c.workers, c.servers,
                      shared_memory);
        const torch::Tensor want = TrainLocalOnWire(c.mode, c.workers, c.servers, dtype);
        ClusterResult got = TrainCluster(RunSpec{.mode = c.mode,
                                                 .workers = c.workers,
                                                 .servers = c.servers,
                                                 .shared_memory = shared_memory,
                                                 .wire_dtype = dtype});
        for (int r = 0; r < c.workers; ++r) {
          CATCH_CAPTURE(r, got.status[r].ToString());
          CATCH_REQUIRE(got.status[r].ok());
          CATCH_CHECK(torch::equal(got.params[r], want));
        }
      }
    }
  }
  // The rounding is not a no-op: each 16-bit run differs from float32 and the two from
  // each other.
  const torch::Tensor f32 = TrainLocalOnWire(Mode::kP3, 2, 2, WireDType::kFloat32);
  const torch::Tensor bf16 = TrainLocalOnWire(Mode::kP3, 2, 2, WireDType::kBFloat16);
  const torch::Tensor f16 = TrainLocalOnWire(Mode::kP3, 2, 2, WireDType::kFloat16);
  CATCH_CHECK(RelativeError(bf16, f32) > 1e-4);
  CATCH_CHECK(RelativeError(f16, f32) > 1e-5);
  CATCH_CHECK_FALSE(torch::equal(bf16, f16));
  // ... and stays close to float32 training (bfloat16 keeps 8 bits: about 0.4 % per value).
  CATCH_CHECK(RelativeError(bf16, f32) < 1e-2);
  CATCH_CHECK(RelativeError(f16, f32) < 1e-3);
  std::cout << "16-bit wire against float32 after " << kSteps
            << " steps (relative): bfloat16 " << RelativeError(bf16, f32) << ", float16 "
            << RelativeError(f16, f32) << "\n";
}

CATCH_TEST_CASE("on a 16-bit wire the streams carry 2 bytes per value, half of float32") {
  torch::set_num_threads(1);
  constexpr int64_t kParams = 12 * 40 + 40 + 40 * 30 + 30 + 30 * 5 + 5;  // TestMlp: 1905
  for (Mode mode : {Mode::kP3, Mode::kBaseline}) {
    CATCH_CAPTURE(ModeName(mode));
    ClusterResult f32 = TrainCluster(
        RunSpec{.mode = mode, .workers = 2, .servers = 2, .shared_memory = false});
    for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
      CATCH_CAPTURE(WireDTypeName(dtype));
      ClusterResult half = TrainCluster(RunSpec{
          .mode = mode, .workers = 2, .servers = 2, .shared_memory = false, .wire_dtype = dtype});
      for (int r = 0; r < 2; ++r) {
        CATCH_CAPTURE(r);
        CATCH_REQUIRE(half.status[r].ok());
        CATCH_REQUIRE(f32.status[r].ok());
        // Worker 1 sends gradients only: every slice of every step at 2 bytes a value.
        // Worker 0 also sends the float32 initial values once.
        const int64_t init = r == 0 ? kParams * 4 : 0;
        CATCH_CHECK(half.stats[r].bytes_sent == init + kSteps * kParams * 2);
        CATCH_CHECK(f32.stats[r].bytes_sent == init + kSteps * kParams * 4);
        // Down: versions 0 .. kSteps of every slice, 2 bytes a value.
        CATCH_CHECK(half.stats[r].bytes_received * 2 == f32.stats[r].bytes_received);
        CATCH_CHECK(half.stats[r].bytes_received == (kSteps + 1) * kParams * 2);
      }
    }
  }
}

CATCH_TEST_CASE("the worker's trace shows a slice's gradient at 2 bytes a value") {
  torch::set_num_threads(1);
  const char* tmp = std::getenv("TEST_TMPDIR");
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    ServerOptions so;
    so.shard.wire_dtype = dtype;
    auto server = ParameterServer::Start(so);
    CATCH_REQUIRE(server.ok());
    TraceRecorder trace({.enabled = true, .process_name = "worker 0"});
    WorkerOptions wo;
    wo.servers = {"127.0.0.1:" + std::to_string((*server)->port())};
    wo.slice_params = kSliceParams;
    wo.peer_timeout = absl::Seconds(30);
    wo.wire_dtype = dtype;
    wo.trace = &trace;
    auto model = MakeModel(1);
    auto worker = Worker::Create(wo, model);
    CATCH_REQUIRE(worker.ok());
    auto [x, y] = GlobalBatch(0, 1);
    for (int step = 0; step < 2; ++step) {
      auto out = (*worker)->Forward(x);
      CATCH_REQUIRE(out.ok());
      CATCH_REQUIRE((*worker)->Backward(model->Loss(*out, y)).ok());
    }
    CATCH_REQUIRE((*worker)->Finish().ok());
    CATCH_CHECK((*server)->Wait().ok());
    const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/wire_trace.json";
    CATCH_REQUIRE(trace.WriteJson(path).ok());
    // Slice 0 is the first 50 values of fc1's weight: its gradient, sent twice.
    std::ifstream in(path);
    std::string line;
    int events = 0;
    const std::string bytes =
        absl::StrCat("\"bytes\": ", kSliceParams * BytesPerValue(dtype), "}");
    while (std::getline(in, line)) {
      if (!absl::StrContains(line, "\"name\": \"gradient 0\"")) continue;
      ++events;
      CATCH_CAPTURE(line);
      CATCH_CHECK(absl::StrContains(line, bytes));
    }
    CATCH_CHECK(events == 2);
  }
}

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

CATCH_TEST_CASE("the trained parameters actually move away from the initial ones") {
  torch::set_num_threads(1);
  const torch::Tensor initial = Flatten(*MakeModel(1));
  ClusterResult got = TrainCluster(Mode::kP3, 2, 2);
  CATCH_REQUIRE(got.status[0].ok());
  CATCH_CHECK(RelativeError(got.params[0], initial) > 1e-3);
}

CATCH_TEST_CASE("a run interrupted and resumed from checkpoints ends with the same parameters") {
  torch::set_num_threads(1);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/resume_test";
  CATCH_REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
  constexpr int kTotal = 8;
  // A schedule whose rate changes at iterations 1, 2, 3 and 6: the resumed servers must
  // take up the rate of iteration 4, not of iteration 0.
  OptimizerOptions scheduled = Sgd();
  scheduled.schedule.kind = LrScheduleKind::kStep;
  scheduled.schedule.step_size = 3;
  scheduled.schedule.gamma = 0.5;
  scheduled.schedule.warmup_iterations = 3;
  ClusterResult uninterrupted =
      TrainCluster(RunSpec{.workers = 2, .servers = 2, .steps = kTotal, .optimizer = scheduled});
  CATCH_REQUIRE(uninterrupted.status[0].ok());

  // Checkpoints at 2 and 4; the cluster dies in iteration 5.
  TrainCluster(RunSpec{.workers = 2,
                       .servers = 2,
                       .steps = 5,
                       .finish = false,
                       .checkpoint_dir = dir,
                       .checkpoint_every = 2,
                       .optimizer = scheduled});
  for (int s = 0; s < 2; ++s) {
    auto latest = ReadLatestCheckpoint(dir + "/server_" + std::to_string(s), 0);
    CATCH_REQUIRE(latest.ok());
    CATCH_CHECK(latest->iteration == 4);
  }
  // A new cluster resumes from iteration 4 and runs to the end.
  ClusterResult resumed = TrainCluster(RunSpec{.workers = 2,
                                               .servers = 2,
                                               .steps = kTotal,
                                               .checkpoint_dir = dir,
                                               .checkpoint_every = 2,
                                               .resume = true,
                                               .optimizer = scheduled});
  for (int r = 0; r < 2; ++r) {
    CATCH_REQUIRE(resumed.status[r].ok());
    CATCH_CHECK(torch::equal(resumed.params[r], uninterrupted.params[r]));  // bit for bit
  }
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
