// The pipeline engine: a model's blocks cut into stages, one thread per stage, trained
// with PipeDream's 1F1B schedule and a selectable way of handling the weights
// (SpecTrain's prediction, PipeDream's stashing, no correction, no pipelining, or data
// parallelism), so that all of them run in one framework and can be compared.
//
// Stages. Stage k runs blocks [begin_k, end_k) (PipelineOptions::boundaries) on its
// device and owns an SGD optimizer (stage_sgd.h) for their parameters. Each stage holds
// its own replica of the model, made by the factory (it must return identically
// initialised models: same seed; Create() checks), and uses only its blocks of it: a
// BlockModel is not thread-safe, so no two threads share one.
//
// Data path. Train() calls the batch source on the caller's thread and feeds stage 0
// through a bounded queue; each stage passes its output (detached) forward and, in its
// backward, the gradient of its input back, through bounded queues of N + 1 items. The last
// stage computes the loss. A stage applies its update right after each backward. Stage
// k's operations follow OneFOneBSchedule() (schedule.h): N-k-1 warm-up forwards, then
// one forward and one backward alternately.
//
// Weights, mini-batch i on stage k (v: SGD's momentum buffer, s: PredictionDistance()):
//   spectrain v1  forward with W - s_f lr v, backward with W - s_b lr v (current W, v)
//   spectrain v2  forward with W - s_f lr v; the backward reuses those weights (stashed)
//   pipedream     forward with the current W, stashed; the backward uses the stash
//   stale         forward and backward each with whatever W is current
//   vanilla       like stale, but with no warm-up forwards: one mini-batch in flight,
//                 which is exactly sequential single-device training
//   data_parallel N replicas of the whole model; the mini-batch is split into N shards,
//                 gradients are averaged (weighted by shard size) and every replica
//                 applies the same update: single-device training on the union batch.
// In spectrain and pipedream the stage's optimizer keeps the real weights apart and the
// stage writes the values each pass needs into the model's parameters (stage_sgd.h);
// updates always apply to the real weights. Between Train() calls the parameters hold the
// real weights.
//
// Errors. A stage that throws (or a source that fails) ends Train() with an error status
// naming the stage, the pass and the mini-batch: the failing thread closes every queue,
// which wakes the other stages, so nothing waits forever. The engine then refuses
// further training.
//
// Devices. "cpu" (every CPU stage is a thread; set threads_per_stage so that N stages
// share the cores instead of each using all of them) or "cuda:<i>". A CUDA device when
// libtorch has no CUDA or sees no GPU is an InvalidArgumentError saying so.
//
// Example:
//   PipelineOptions options;
//   options.mode = WeightMode::kSpecTrain;
//   options.num_stages = 2;
//   options.boundaries = {2};             // blocks 0-1 | 2-3
//   options.sgd = {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4};
//   auto engine = PipelineEngine::Create(options, [] {
//     return models::CreateModel({.name = "small_cnn", .seed = 1});
//   });
//   if (!engine.ok()) return engine.status();
//   absl::StatusOr<TrainStats> stats = (*engine)->Train(
//       1875, [&](int64_t i) -> absl::StatusOr<models::Batch> { return train->Get(Indices(i)); });
//   absl::StatusOr<torch::Tensor> logits = (*engine)->Infer(test_batch.input);
//
// Thread-compatible: one controlling thread calls Train(), Infer(), Parameters() and
// Shutdown(); the engine's own threads do the rest. Callbacks in PipelineOptions run on
// stage threads.
#ifndef P3_PIPELINE_ENGINE_H_
#define P3_PIPELINE_ENGINE_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/dataset.h"
#include "models/model.h"
#include "p3/pipeline/bounded_queue.h"
#include "p3/pipeline/partition.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/stage_sgd.h"

namespace p3::pipeline {

// One forward or backward of one mini-batch on one stage (data_parallel: one replica).
struct PipelineEvent {
  int stage = 0;
  Pass pass = Pass::kForward;
  int64_t microbatch = 0;
  // Updates the stage had applied when the weights used were current: the version of the
  // real weights behind them (for a stashed backward, the forward's version).
  int64_t weight_version = 0;
  // SpecTrain's s actually applied (0: none, also before the first update).
  int prediction = 0;
  // Weight copies held by the stage after the operation (pipedream, spectrain v2).
  int64_t stashed = 0;
};

struct PipelineOptions {
  // Default: spectrain.
  WeightMode mode = WeightMode::kSpecTrain;
  // SpecTrain's version, 1 (the paper's) or 2. Default: 1.
  int spectrain_version = 1;
  // Number of stages (data_parallel: replicas), >= 1. Default: 2.
  int num_stages = 2;
  // Device of each stage: "cpu", "cuda" (= "cuda:0") or "cuda:<i>". Default: empty,
  // "cpu" for every stage; else exactly num_stages entries.
  std::vector<std::string> devices;
  // First block of stages 1..N-1 (partition.h). Default: empty, blocks split evenly by
  // count. Ignored by data_parallel.
  std::vector<int64_t> boundaries;
  // The optimizer every stage runs on its parameters. Default: SgdOptions's defaults.
  SgdOptions sgd;
  // torch::set_num_threads() on each stage thread (libtorch's OpenMP setting is per
  // thread); 0 leaves libtorch's default. Default: 1.
  int threads_per_stage = 1;
  // Called after every forward and backward, on the stage's thread. Default: none.
  std::function<void(const PipelineEvent&)> on_event;
  // Called when mini-batch i is done (every stage has applied its update), with its
  // training loss, on stage 0's thread. Default: none.
  std::function<void(int64_t microbatch, double loss)> on_done;
};

// What Train() measured, one entry per mini-batch of the call.
struct TrainStats {
  // Training loss (data_parallel: of the union batch, the shard losses weighted).
  std::vector<double> losses;
  // Seconds from the start of Train() until every stage had applied the mini-batch's
  // update.
  std::vector<double> done_seconds;
};

class PipelineEngine {
 public:
  using ModelFactory = std::function<absl::StatusOr<std::shared_ptr<models::BlockModel>>()>;
  using BatchSource = std::function<absl::StatusOr<models::Batch>(int64_t index)>;

  // Validates `options` (InvalidArgumentError naming the field), makes one replica per
  // stage with `factory` (on this thread) and starts the stage threads.
  static absl::StatusOr<std::unique_ptr<PipelineEngine>> Create(const PipelineOptions& options,
                                                                const ModelFactory& factory);

  ~PipelineEngine();
  PipelineEngine(const PipelineEngine&) = delete;
  PipelineEngine& operator=(const PipelineEngine&) = delete;

  // Trains on `count` mini-batches source(0), ..., source(count-1) (called on this
  // thread, in order), from an empty pipeline until it is drained again. Returns the
  // first error of a stage or the source; after an error every later call returns
  // FailedPreconditionError with it.
  absl::StatusOr<TrainStats> Train(int64_t count, const BatchSource& source);

  // The last block's output for `input`, without gradients and in eval() mode, computed
  // stage by stage on this thread; on the CPU.
  absl::StatusOr<torch::Tensor> Infer(const torch::Tensor& input);

  // Copies (on the CPU) of the real parameters in model order.
  std::vector<torch::Tensor> Parameters();

  // Block ranges of the stages (data_parallel: every replica runs all blocks).
  const std::vector<StageRange>& stage_ranges() const { return ranges_; }
  const PipelineOptions& options() const { return options_; }

  // Stops and joins the stage threads; Train() fails afterwards. Safe to call twice.
  void Shutdown();

 private:
  struct Message {
    int64_t microbatch = 0;
    torch::Tensor tensor;  // activation (forward) or gradient (backward)
    torch::Tensor target;  // forward only
    double weight = 1;     // data_parallel: this shard's share of the mini-batch
  };
  struct InFlight;
  struct Stage;
  struct Job {
    int64_t count = 0;
    absl::Time start;
    TrainStats* stats = nullptr;
  };
  class GradientExchange;

  explicit PipelineEngine(const PipelineOptions& options);

  void StageLoop(int k);
  absl::Status RunPipelineJob(int k, const Job& job);
  absl::Status RunDataParallelJob(int k, const Job& job);
  absl::Status Forward(Stage& stage, Message message, const Job& job);
  absl::Status Backward(Stage& stage, int64_t microbatch, const torch::Tensor& grad,
                        const Job& job);
  absl::Status Feed(int64_t count, const BatchSource& source);
  // Records the first error and closes every queue.
  void Fail(const absl::Status& status);
  void Emit(const PipelineEvent& event) const;

  const PipelineOptions options_;
  const int n_;
  std::vector<StageRange> ranges_;
  std::vector<std::unique_ptr<Stage>> stages_;
  // forward_[k] feeds stage k (forward_[0] from Train()); backward_[k] carries the
  // gradient of stage k's output from stage k+1.
  std::vector<std::unique_ptr<BoundedQueue<Message>>> forward_;
  std::vector<std::unique_ptr<BoundedQueue<Message>>> backward_;
  std::unique_ptr<GradientExchange> exchange_;

  absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  Job job_ ABSL_GUARDED_BY(mu_);
  int stages_done_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // touched only by the controlling thread
};

// The device a stage's name means: "cpu", "cuda" or "cuda:<i>". InvalidArgumentError for
// other names, and for CUDA when libtorch sees no GPU (a CPU-only build or none present),
// naming torch::cuda::device_count().
absl::StatusOr<torch::Device> ParseStageDevice(const std::string& name);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_ENGINE_H_
