// The order of operations of one pipeline stage, and how far each stage's weights are
// behind (and how far SpecTrain predicts them ahead).
//
// 1F1B (PipeDream's "one forward, one backward"), N stages, stage k = 0..N-1, M
// mini-batches: stage k first runs min(N-k-1, M) forwards (warm-up), then alternates one
// forward and one backward, and ends with the backwards still owed (cool-down). Every
// stage updates its weights right after each backward, so the forward of mini-batch i
// on stage k sees the weights after max(0, i-(N-k-1)) updates: N-k-1 versions behind
// the sequential run, which is the staleness SpecTrain predicts away. With
// `pipelined = false` (the `vanilla` mode) the warm-up is 0 on every stage, which
// leaves one mini-batch at a time in the pipeline: sequential training cut into stages.
//
// Example (N = 4, M = 6):
//   OneFOneBSchedule(4, 0, 6, true)  ->  F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5
//   OneFOneBSchedule(4, 3, 6, true)  ->  F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5
//   PredictionDistance(WeightMode::kSpecTrain, 1, 4, 0, Pass::kForward)  ->  3
//
// Plain functions, no state: thread-safe.
#ifndef P3_PIPELINE_SCHEDULE_H_
#define P3_PIPELINE_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace p3::pipeline {

enum class Pass { kForward, kBackward };

struct ScheduleStep {
  Pass pass = Pass::kForward;
  int64_t microbatch = 0;
  // The model chunk of the stage it runs on (interleaved 1F1B); 0 for the others.
  int chunk = 0;

  bool operator==(const ScheduleStep& other) const {
    return pass == other.pass && microbatch == other.microbatch && chunk == other.chunk;
  }
};

// "F3" or "B0"; with a chunk > 0 or `with_chunk`, "F3c1".
std::string StepName(const ScheduleStep& step, bool with_chunk = false);
// Space-separated StepName()s, e.g. "F0 F1 B0" ("F0c0 F1c0 F0c1 ..." with `with_chunk`).
std::string ScheduleString(const std::vector<ScheduleStep>& steps, bool with_chunk = false);

// The forwards to run before the first backward on `stage`: min(N-stage-1, M) when
// pipelined, else 0.
int64_t WarmupForwards(int num_stages, int stage, int64_t num_microbatches, bool pipelined);

// Stage `stage`'s operations for mini-batches 0..num_microbatches-1, in order.
// Requires 0 <= stage < num_stages.
std::vector<ScheduleStep> OneFOneBSchedule(int num_stages, int stage, int64_t num_microbatches,
                                           bool pipelined);

// How a stage orders the forwards and backwards of a Train() call.
enum class PipelineSchedule {
  // PipeDream's 1F1B over whole mini-batches (OneFOneBSchedule()); each stage updates
  // right after each backward, so weights are stale and the weight mode treats them.
  kOneFOneB,
  // GPipe: each mini-batch split into micro-batches; every stage runs all their
  // forwards, then all their backwards (GPipeSchedule()), accumulating the gradients,
  // and updates once per mini-batch: no stale weights, single-device training.
  kGPipe,
  // Megatron-LM's interleaved 1F1B: each of the K stages (devices) holds V model chunks,
  // virtual stages d, d + K, ..., d + (V-1) K of a K V-stage cut; each mini-batch split
  // into M micro-batches (M a multiple of K) runs InterleavedSchedule(), gradients
  // accumulate and every virtual stage updates once per mini-batch, after its last
  // backward: single-device training, like kGPipe, with a fill and drain V times shorter.
  kInterleaved1F1B,
};

// "1f1b", "gpipe", "interleaved_1f1b".
std::string PipelineScheduleName(PipelineSchedule schedule);
// InvalidArgumentError naming the allowed names for an unknown name.
absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(absl::string_view name);

// One stage's operations under GPipe for mini-batches 0..num_minibatches-1 of
// `microbatches` micro-batches each, numbered j = i * microbatches + m: per mini-batch
// F(j) for every micro-batch, then B(j) in the same order. The same on every stage (a
// stage's idle time is the wait for its input). Requires microbatches >= 1.
// Example: GPipeSchedule(2, 3) -> F0 F1 F2 B0 B1 B2 F3 F4 F5 B3 B4 B5
std::vector<ScheduleStep> GPipeSchedule(int64_t num_minibatches, int64_t microbatches);

// GPipe's ideal bubble fraction with K stages of equal cost and M micro-batches per
// mini-batch: (K - 1) / (M + K - 1), the share of each stage's time spent idle.
double GPipeBubbleFraction(int num_stages, int64_t microbatches);

// Stage `stage` of `num_stages` (K) under interleaved 1F1B with `chunks` (V) model chunks
// per stage, for mini-batches 0..num_minibatches-1 of `microbatches` (M) micro-batches
// each, numbered j = i * M + m; step.chunk is the chunk (virtual stage chunk * K + stage).
// Per mini-batch, Megatron-LM's order (forward_backward_pipelining_with_interleaving):
// the V M forwards run in groups of K micro-batches per chunk, chunk 0 to V-1 (forward
// number f is chunk (f mod K V) div K, micro-batch (f div K V) K + f mod K); the
// backwards likewise with the chunks in reverse order; the stage first runs
// min(2 (K - stage - 1) + (V - 1) K, V M) forwards (all V M when M = K), then alternates
// one forward and one backward, then runs the backwards left. Requires K >= 1, V >= 1, M
// a positive multiple of K.
// Example: InterleavedSchedule(2, 0, 2, 1, 2) ->
//   F0c0 F1c0 F0c1 F1c1 B0c1 B1c1 B0c0 B1c0
std::vector<ScheduleStep> InterleavedSchedule(int num_stages, int stage, int chunks,
                                              int64_t num_minibatches, int64_t microbatches);

// Interleaved 1F1B's ideal bubble fraction with K stages of equal cost, V chunks per stage
// and M micro-batches: (K - 1) / (V M + K - 1). Each stage spends t / V per micro-batch
// and chunk (t: its whole share of a micro-batch's forward and backward); the fill and
// the drain each take (K - 1) such chunk-steps, against M t of work: bubble
// (K - 1) t / V over M t + (K - 1) t / V. V = 1 is GPipe's (K - 1) / (M + K - 1).
double InterleavedBubbleFraction(int num_stages, int chunks, int64_t microbatches);

// How the stages treat weights between a mini-batch's forward and its backward.
enum class WeightMode {
  kSpecTrain,     // predict the weights s versions ahead: W - s * lr * v
  kPipeDream,     // weight stashing: the backward uses the forward's weight version
  kStale,         // pipelined, no correction: forward and backward see whatever is current
  kVanilla,       // one mini-batch at a time through the stages (no pipelining)
  kDataParallel,  // N replicas of the whole model, gradients averaged every mini-batch
};

// "spectrain", "pipedream", "stale", "vanilla", "data_parallel".
std::string WeightModeName(WeightMode mode);
// InvalidArgumentError naming the allowed names otherwise.
absl::StatusOr<WeightMode> ParseWeightMode(absl::string_view name);
// The names ParseWeightMode() accepts, in the order above.
std::vector<std::string> WeightModeNames();

// Whether stages overlap mini-batches (1F1B with warm-up): spectrain, pipedream, stale.
bool IsPipelined(WeightMode mode);

// SpecTrain's version difference s: how many updates ahead stage `stage` of `num_stages`
// predicts its weights for `pass`. Version 1 (the paper's): forward floor(k/2) + N-k-1,
// backward floor(k/2); N = 4 gives forward 3, 2, 2, 1 and backward 0, 0, 1, 1. Version
// 2: forward N-k-1; its backward reuses the forward's predicted weights, so the value
// for kBackward is the forward's. 0 for every other mode.
int PredictionDistance(WeightMode mode, int spectrain_version, int num_stages, int stage,
                       Pass pass);

// Whether stage `stage` must keep its real weights apart from the model's parameters
// (stage_sgd.h, separate_real) because a forward or backward runs with other values:
// SpecTrain where PredictionDistance() is not 0 for some pass, PipeDream on every stage
// but the last. The last stage of a 1F1B pipeline runs each backward right after its
// forward, with no update between, so PipeDream's stash there would hold the current
// weights and SpecTrain's s = 0 prediction would copy them: both skipped, for the same
// arithmetic without the copies. False for every other mode.
bool KeepsRealWeightsApart(WeightMode mode, int spectrain_version, int num_stages, int stage);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_SCHEDULE_H_
