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
// Modes. This class owns the replicas, the stage threads, the hand-out of each Train()
// call to them and the first error; what a stage does with a mini-batch is the mode's
// (mode_engine.h):
//   spectrain, pipedream, stale, vanilla   the 1F1B stage pipeline (stage_engine.h): the
//       batch source feeds stage 0, activations go forward and gradients back through
//       bounded queues, each stage updates right after each backward; the weight rules
//       of each mode are listed there
//   data_parallel   N replicas of the whole model (data_parallel_engine.h); the
//       mini-batch is split into N shards, gradients are averaged (weighted by shard
//       size) and every replica applies the same update: single-device training on the
//       union batch.
// Updates always apply to the real weights; between Train() calls the parameters hold
// the real weights.
//
// Errors. A stage that throws (or a source that fails) ends Train() with an error status
// naming the stage, the pass and the mini-batch: the failing thread closes every channel,
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
//   P3_ASSIGN_OR_RETURN(std::unique_ptr<PipelineEngine> engine,
//                       PipelineEngine::Create(options, [] {
//                         return models::CreateModel({.name = "small_cnn", .seed = 1});
//                       }));
//   absl::StatusOr<TrainStats> stats = engine->Train(
//       1875, [&](int64_t i) -> absl::StatusOr<models::Batch> { return train->Get(Indices(i)); });
//   absl::StatusOr<torch::Tensor> logits = engine->Infer(test_batch.input);
//
// Thread-compatible: one controlling thread calls Train(), Infer(), Parameters() and
// Shutdown(); the engine's own threads do the rest. Callbacks in PipelineOptions run on
// stage threads.
#ifndef P3_PIPELINE_ENGINE_H_
#define P3_PIPELINE_ENGINE_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "p3/pipeline/engine_options.h"
#include "p3/pipeline/mode_engine.h"
#include "p3/pipeline/partition.h"
#include "p3/pipeline/stage_memory.h"

namespace p3::pipeline {

class PipelineEngine {
 public:
  using ModelFactory = p3::pipeline::ModelFactory;
  using BatchSource = p3::pipeline::BatchSource;

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

  // With PipelineOptions::measure_memory: per stage (data_parallel: replica), the CPU
  // tensor bytes its thread allocated (stage_memory.h) since Create() or the last
  // ResetMemoryPeaks(); the model replica and optimizer made for it in Create() are
  // counted for it too (categories model, optimizer). Empty without measure_memory.
  std::vector<StageMemoryStats> MemoryStats() const;
  void ResetMemoryPeaks();
  // Bytes of the parameters of each stage's own blocks (data_parallel: the whole model;
  // interleaved 1F1B: all its chunks').
  std::vector<int64_t> StageParameterBytes() const;

  // Block ranges of the stages (data_parallel: every replica runs all blocks; interleaved
  // 1F1B: of the virtual stages, num_stages * chunks of them).
  const std::vector<StageRange>& stage_ranges() const { return ranges_; }
  const PipelineOptions& options() const { return options_; }

  // Stops and joins the stage threads; Train() fails afterwards. Safe to call twice.
  void Shutdown();

 private:
  PipelineEngine(const PipelineOptions& options, std::vector<StageRange> ranges,
                 std::vector<std::unique_ptr<StageReplica>> replicas,
                 std::shared_ptr<MemoryLedger> memory);

  void StageLoop(int k);
  // Records the first error and closes every channel.
  void Fail(const absl::Status& status);
  // The replicas Infer() and Parameters() read: every stage, or replica 0 alone.
  int ModelStages() const;

  const PipelineOptions options_;
  const int n_;
  const std::vector<StageRange> ranges_;
  const std::vector<std::unique_ptr<StageReplica>> replicas_;
  std::unique_ptr<ModeEngine> mode_;  // uses replicas_
  const std::shared_ptr<MemoryLedger> memory_;  // null without measure_memory

  absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  TrainJob job_ ABSL_GUARDED_BY(mu_);
  int stages_done_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // touched only by the controlling thread
};

// The stages the model is cut into: num_stages, or num_stages * chunks under interleaved
// 1F1B (the length of boundaries plus one).
int VirtualStages(const PipelineOptions& options);

// The device a stage's name means: "cpu", "cuda" or "cuda:<i>". InvalidArgumentError for
// other names, and for CUDA when libtorch sees no GPU (a CPU-only build or none present),
// naming torch::cuda::device_count().
absl::StatusOr<torch::Device> ParseStageDevice(const std::string& name);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_ENGINE_H_
