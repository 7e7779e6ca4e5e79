// A complete pipeline training run from an experiment config in mode "pipeline": what the
// pipeline_train binary does (docs/pipeline.md).
//
// It loads the data (models/data.h), reads mini-batches of training.batch_size in the
// sampler's order (models/sampler.h, one worker), chooses the stage boundaries
// (pipeline.boundaries, or balanced by profiling pipeline.profile_batches batches per
// block on the calling thread, pipeline/profile.h), builds a PipelineEngine and trains
// epoch by epoch; the pipeline is drained at the end of each epoch and, with
// training.evaluate, the test accuracy measured. training.iterations > 0 stops after that
// many mini-batches (the last epoch cut short).
//
// Example:
//   absl::StatusOr<p3::config::ExperimentConfig> config =
//       p3::config::LoadConfig("configs/pipeline_spectrain.textproto", {"pipeline.stages=4"});
//   if (!config.ok()) return config.status();
//   p3::pipeline::RunOptions options;
//   options.progress = &std::cout;
//   absl::StatusOr<p3::pipeline::RunResult> result = p3::pipeline::RunPipeline(*config, options);
//   if (result.ok()) std::cout << result->ToJson() << "\n";
//
// Thread-compatible; the run owns its threads and joins them before returning.
#ifndef P3_PIPELINE_RUNNER_H_
#define P3_PIPELINE_RUNNER_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"

namespace p3::pipeline {

struct RunOptions {
  // Where PROGRESS and EPOCH lines go; null for none. Default: none.
  std::ostream* progress = nullptr;
};

struct EpochRecord {
  int epoch = 0;  // 1-based
  int64_t iterations = 0;
  double train_loss = 0;  // mean over the epoch's mini-batches
  double seconds = 0;     // training time of the epoch, evaluation excluded
  // Steady-state rate: samples of the mini-batches after the first
  // training.warmup_iterations over the time they took.
  double samples_per_second = 0;
  std::optional<double> test_accuracy;  // with training.evaluate
};

struct RunResult {
  std::string name;
  std::string weights;  // pipeline.weights
  int spectrain_version = 1;
  int stages = 0;
  std::vector<std::string> devices;
  std::vector<int64_t> boundaries;        // used (data_parallel: none)
  std::vector<std::string> stage_blocks;  // e.g. "conv1+conv2", per stage
  std::vector<std::string> block_names;
  std::vector<double> block_seconds;  // profiled forward + backward; empty if not profiled
  int64_t batch_size = 0;
  int64_t iterations = 0;
  double samples_per_second = 0;        // median over the epochs
  double final_loss = 0;                // mean of the last (up to) 20 mini-batches
  std::optional<double> test_accuracy;  // after the last epoch
  double wall_seconds = 0;
  std::vector<EpochRecord> epochs;

  std::string ToJson() const;
  // epoch,iterations,train_loss,seconds,samples_per_second,test_accuracy
  std::string EpochsCsv() const;
};

// `config` must be loaded with proto/config.h (defaults filled, validated) and have mode
// "pipeline". Errors: the data set's or model's, an InvalidArgumentError for boundaries
// that do not fit the model or a device that is not present, the engine's on failure.
absl::StatusOr<RunResult> RunPipeline(const config::ExperimentConfig& config,
                                      const RunOptions& options);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_RUNNER_H_
