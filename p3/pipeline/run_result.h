// What a pipeline run (runner.h) reports: one record per epoch and the run's summary, as
// JSON (the RESULT line and --result_file), CSV (--epochs_file) and the EPOCH line.
//
// Example:
//   RunResult result;
//   result.epochs.push_back({.epoch = 1, .iterations = 12, .train_loss = 0.9});
//   std::cout << FormatEpochLine(result.epochs[0]) << "\n" << result.ToJson() << "\n";
//
// Plain values; thread-compatible.
#ifndef P3_PIPELINE_RUN_RESULT_H_
#define P3_PIPELINE_RUN_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "p3/pipeline/stage_timer.h"

namespace p3::pipeline {

struct EpochRecord {
  int epoch = 0;  // 1-based
  int64_t iterations = 0;
  double train_loss = 0;  // mean over the epoch's mini-batches
  double seconds = 0;     // training time of the epoch, evaluation excluded
  // Steady-state rate: samples of the mini-batches after the first
  // training.warmup_iterations over the time they took.
  double samples_per_second = 0;
  std::optional<double> test_accuracy;  // with training.evaluate
  // The stages' idle share: 1 - (their busy seconds) / (stages * seconds) (BubbleFraction()).
  double bubble_fraction = 0;
};

// One stage's measured CPU tensor memory over the run (stage_memory.h), in bytes.
struct StageMemoryRecord {
  int stage = 0;
  int64_t parameter_bytes = 0;  // the parameters of the stage's own blocks
  int64_t peak_bytes = 0;       // the most live at once (model replica included)
  // Per category ("model", "optimizer", "stash", "forward", "backward", "other"): live at
  // the stage's peak, and the category's own peak.
  std::vector<std::pair<std::string, int64_t>> at_peak;
  std::vector<std::pair<std::string, int64_t>> category_peak;
};

struct RunResult {
  std::string name;
  std::string weights;  // pipeline.weights
  int spectrain_version = 1;
  int stages = 0;
  std::string schedule;      // pipeline.schedule
  int64_t microbatches = 1;  // pipeline.microbatches
  bool recompute = false;    // pipeline.recompute
  int chunks = 1;            // pipeline.chunks
  int64_t train_samples = 0;  // training samples read per epoch
  std::vector<std::string> devices;
  std::vector<int64_t> boundaries;        // used (data_parallel: none)
  // E.g. "conv1+conv2", per stage (interleaved 1F1B: per virtual stage; stage d runs
  // entries d, d + stages, ...).
  std::vector<std::string> stage_blocks;
  std::vector<std::string> block_names;
  std::vector<double> block_seconds;  // profiled forward + backward; empty if not profiled
  int64_t batch_size = 0;
  int64_t iterations = 0;
  double samples_per_second = 0;        // median over the epochs
  // Over all epochs: 1 - (the stages' busy seconds) / (stages * training seconds).
  double bubble_fraction = 0;
  double final_loss = 0;                // mean of the last (up to) 20 mini-batches
  std::optional<double> test_accuracy;  // after the last epoch
  double wall_seconds = 0;
  // Per stage (data_parallel: replica), over all epochs: seconds by kind of work, waits
  // and the thread's CPU seconds (stage_timer.h).
  std::vector<StageTimes> stage_times;
  // The Chrome trace of the stages (config `trace: true`), or empty.
  std::string trace_file;
  std::vector<EpochRecord> epochs;
  std::vector<StageMemoryRecord> memory;  // per stage; empty when not measured

  // One line; a loss that is not finite (a diverged run) is null, as JSON has no NaN.
  std::string ToJson() const;
  // epoch,iterations,train_loss,seconds,samples_per_second,test_accuracy
  std::string EpochsCsv() const;
};

// "MEMORY stage=<k> peak_mib=<f> params_mib=<f> model=<f> optimizer=<f> stash=<f>
// forward=<f> backward=<f> other=<f>" (MiB live at the stage's peak), without a newline.
std::string FormatMemoryLine(const StageMemoryRecord& record);

// "EPOCH epoch=<e> train_loss=<f> seconds=<f> samples_per_second=<f> test_accuracy=<f|null>",
// without a newline.
std::string FormatEpochLine(const EpochRecord& record);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_RUN_RESULT_H_
