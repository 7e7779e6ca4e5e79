// What a PipelineEngine (engine.h) is configured with and what it reports: its options,
// the events its stages emit, the statistics of a Train() call, and the model factory and
// batch source it is given. Shared by the engine and the two ways it trains
// (stage_engine.h, data_parallel_engine.h).
#ifndef P3_PIPELINE_ENGINE_OPTIONS_H_
#define P3_PIPELINE_ENGINE_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/dataset.h"
#include "models/model.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/stage_sgd.h"
#include "p3/pipeline/stage_timer.h"
#include "p3/base/trace.h"

namespace p3::pipeline {

// One forward or backward of one mini-batch on one stage (data_parallel: one replica).
struct PipelineEvent {
  // The stage; under kInterleaved1F1B the virtual stage (chunk * num_stages + stage).
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
  // The micro-batch of mini-batch `microbatch` (schedule gpipe: 0..microbatches-1;
  // always 0 under 1f1b, whose unit is the whole mini-batch).
  int64_t part = 0;
};

struct PipelineOptions {
  // Default: spectrain.
  WeightMode mode = WeightMode::kSpecTrain;
  // SpecTrain's version, 1 (the paper's) or 2. Default: 1.
  int spectrain_version = 1;
  // Number of stages (data_parallel: replicas), >= 1. Default: 2.
  int num_stages = 2;
  // The order of forwards and backwards (schedule.h). kGPipe and kInterleaved1F1B
  // require mode kVanilla: they update once per mini-batch after draining, so no weights
  // are stale.
  // Default: kOneFOneB.
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  // Micro-batches per mini-batch under kGPipe and kInterleaved1F1B (1..the mini-batch's
  // size; sizes differ by at most one sample; a multiple of num_stages under
  // kInterleaved1F1B, as Megatron-LM requires); 1 under kOneFOneB. Default: 1.
  int64_t microbatches = 1;
  // Model chunks per stage under kInterleaved1F1B (2..64): the model is cut into
  // num_stages * chunks virtual stages (`boundaries` then has num_stages * chunks - 1
  // entries) and stage d runs virtual stages d, d + num_stages, ...; 1 under the other
  // schedules. Default: 1.
  int chunks = 1;
  // Device of each stage: "cpu", "cuda" (= "cuda:0") or "cuda:<i>". Default: empty,
  // "cpu" for every stage; else exactly num_stages entries.
  std::vector<std::string> devices;
  // First block of stages 1..N-1 (partition.h). Default: empty, blocks split evenly by
  // count. Ignored by data_parallel.
  std::vector<int64_t> boundaries;
  // The optimizer every stage runs on its parameters, checked by ValidateSgdOptions().
  // Default: SgdOptions's defaults.
  SgdOptions sgd;
  // torch::set_num_threads() on each stage thread (libtorch's OpenMP setting is per
  // thread); 0 leaves libtorch's default. The calling thread's setting is left alone.
  // Default: 1.
  int threads_per_stage = 1;
  // Where the stages record their work as Chrome trace events, one track per stage
  // (stage_timer.h); null or disabled: no trace. Must outlive the engine. Default: none.
  TraceRecorder* trace = nullptr;
  // Activation recomputation (1F1B stage modes and gpipe): a forward keeps only the
  // stage's input and runs without autograd; the backward reruns the forward with the
  // weights the forward used (pipedream's stash, SpecTrain's prediction: kept as a stash
  // for spectrain v1 and stale, which otherwise keep none) and back-propagates. Results
  // equal recompute off bit for bit; BatchNorm's running statistics are restored after the
  // rerun so that they move once per forward. Not with data_parallel (nothing to
  // recompute: its backward follows its forward at once), and for the same reason not on
  // the last stage under 1F1B, which keeps its one unit's activations. Default: false.
  bool recompute = false;
  // Count every stage thread's CPU tensor allocations per stage (stage_memory.h);
  // installs the process-wide counting CPU allocator (InstallCpuMemoryTracking()) when
  // the engine is created. PipelineEngine::MemoryStats() then has the figures.
  // Default: false.
  bool measure_memory = false;
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
  // Per stage (data_parallel: replica), the seconds its thread spent in forwards,
  // backwards and updates (wall clock, waits for other stages excluded).
  std::vector<double> busy_seconds;
  // Per stage (data_parallel: replica), the same time by kind of work, with the waits and
  // the thread's CPU time (stage_timer.h).
  std::vector<StageTimes> stage_times;
  // Seconds from the start of Train() until every stage was done.
  double seconds = 0;
};

// The share of the stages' time spent idle in a Train() call:
// 1 - sum(busy_seconds) / (stages * seconds); 0 when nothing was measured.
double BubbleFraction(const TrainStats& stats);

// Makes one replica of the model; every call must return an identically initialised one.
using ModelFactory = std::function<absl::StatusOr<std::shared_ptr<models::BlockModel>>()>;
// Mini-batch `index` of a Train() call.
using BatchSource = std::function<absl::StatusOr<models::Batch>(int64_t index)>;

// InvalidArgumentError naming the field (num_stages, spectrain_version, devices,
// threads_per_stage, schedule, microbatches, sgd.*) when `options` are out of range. Boundaries and device names
// are checked when the engine is created (they depend on the model and the machine).
absl::Status ValidatePipelineOptions(const PipelineOptions& options);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_ENGINE_OPTIONS_H_
