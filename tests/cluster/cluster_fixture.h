// What the end-to-end cluster tests share (cluster_equivalence_test's sources,
// worker_refusal_test, peer_failure_test): the test model and its batches, the optimizers,
// the reference `local` training, and a whole cluster run of in-process servers and
// worker threads over real gRPC on loopback, on OS-chosen ports.
//
// Example:
//   const torch::Tensor want = TrainLocal(2);
//   ClusterResult got = TrainCluster(RunSpec{.mode = Mode::kP3, .workers = 2, .servers = 2});
//   CATCH_REQUIRE(got.status[0].ok());
//   CATCH_CHECK(RelativeError(got.params[0], want) <= 1e-5);
//
// TrainCluster uses Catch2's assertions, on the calling thread only.
#ifndef P3_TESTS_CLUSTER_CLUSTER_FIXTURE_H_
#define P3_TESTS_CLUSTER_CLUSTER_FIXTURE_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "models/model.h"
#include "p3/core/mode.h"
#include "p3/core/optimizer.h"
#include "p3/core/slice_plan.h"
#include "p3/core/wire_dtype.h"
#include "worker/worker.h"

namespace p3::cluster_test {

inline constexpr int64_t kBatch = 4;  // per worker
inline constexpr int64_t kSliceParams = 50;
inline constexpr int kSteps = 4;

// The model of a run: the plain MLP, the one with batch normalisation, or the plain one
// with a wide middle layer (1,048,576 weights: messages of real size at large slices).
enum class ModelKind { kMlp, kBatchNorm, kWide };

std::shared_ptr<models::BlockModel> MakeModel(uint64_t seed, ModelKind kind = ModelKind::kMlp);

// The global batch of step `step`: rows [r*kBatch, (r+1)*kBatch) belong to worker r.
// Seeds libtorch's global generator: not for several threads at once (draw the batches
// before starting the workers' threads, as worker_test does).
std::pair<torch::Tensor, torch::Tensor> GlobalBatch(int step, int workers);

// SGD with momentum and weight decay; the same with a warm-up + cosine schedule (every
// iteration has a rate of its own); Adam with a step schedule.
OptimizerOptions Sgd();
OptimizerOptions ScheduledSgd();
OptimizerOptions ScheduledAdam();

// The model's parameters, flattened in their order.
torch::Tensor Flatten(models::BlockModel& model);

// The reference: plain libtorch training on the union of the batches, with libtorch's
// optimizer at the scheduled rate of each iteration. With batch normalisation, each
// worker's rows are normalised on their own and the loss is the mean of the workers'.
// `normalise_union` instead runs one forward over the union (to show that it differs).
torch::Tensor TrainLocal(int workers, const OptimizerOptions& o = Sgd(),
                         ModelKind kind = ModelKind::kMlp, bool normalise_union = false);

// What a cluster run is: mode, size, steps, checkpoints, and the switches under test.
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
  int64_t pack_params = 0;                     // packs of small tensors (WorkerOptions)
  int64_t slice_params = kSliceParams;         // the plan's slice size (WorkerOptions)
  // Re-plans rank 0 requests: (before iteration, slice_params).
  std::vector<std::pair<int64_t, int64_t>> replans;
};

// What each worker of a cluster run ended with.
struct ClusterResult {
  std::vector<torch::Tensor> params;  // per worker
  // The float32 buffers flattened, per worker, before and after AverageBuffers().
  std::vector<torch::Tensor> buffers_before;
  std::vector<torch::Tensor> buffers_after;
  std::vector<absl::Status> status;
  // Per server, what Wait() returned (spec.finish only): checked to be OK by TrainCluster
  // when every worker's status is; a run whose workers failed leaves it to the test.
  std::vector<absl::Status> server_status;
  std::vector<WorkerStats> stats;
  std::vector<int> replans;  // per worker, that took effect
  std::vector<int64_t> final_slice_params;  // per worker
  absl::Status replan_status;               // the last refused RequestReplan of rank 0
};

// S in-process servers and W worker threads train `spec.steps` iterations of the test
// model; rank r trains on rows [r*kBatch, (r+1)*kBatch) of each GlobalBatch.
ClusterResult TrainCluster(const RunSpec& spec);
ClusterResult TrainCluster(Mode mode, int workers, int servers);

// |a - b| / |b|.
double RelativeError(const torch::Tensor& a, const torch::Tensor& b);

// Every cluster mode of p3/core/mode.h, so that a new one is covered when it is added.
std::vector<Mode> ClusterModes();

}  // namespace p3::cluster_test

#endif  // P3_TESTS_CLUSTER_CLUSTER_FIXTURE_H_
