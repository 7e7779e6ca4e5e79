// A complete pipeline training run from an experiment config in mode "pipeline": what the
// pipeline_train binary does (docs/pipeline.md).
//
// It loads the data (models/data.h), reads mini-batches of training.batch_size in the
// sampler's order (models/sampler.h, one worker; only the first pipeline.train_samples
// samples of the training set when that is set), chooses the stage boundaries
// (pipeline.boundaries, or balanced by profiling pipeline.profile_batches batches per
// block on the calling thread, pipeline/profile.h), builds a PipelineEngine and trains
// epoch by epoch; the pipeline is drained at the end of each epoch and, with
// training.evaluate, the test accuracy measured. training.iterations > 0 stops after that
// many mini-batches (the last epoch cut short).
//
// Memory. Each stage's CPU tensor allocations are counted (PipelineOptions::
// measure_memory, stage_memory.h: a process-wide counting CPU allocator is installed);
// RunResult::memory has each stage's peak and its breakdown, and a MEMORY line per stage
// goes to RunOptions::progress after the last epoch.
//
// Threads. The stage threads run with training.threads libtorch threads each; profiling
// and evaluation run on the calling thread with whatever libtorch thread count the
// process has. RunPipeline() does not change it (it is process-wide state): the caller
// does, e.g. pipeline_train calls torch::set_num_threads(training.threads) first.
//
// Example:
//   P3_ASSIGN_OR_RETURN(
//       p3::config::ExperimentConfig config,
//       p3::config::LoadConfig("configs/pipeline_spectrain.textproto", {"pipeline.stages=4"}));
//   torch::set_num_threads(config.training().threads());
//   p3::pipeline::RunOptions options;
//   options.progress = &std::cout;
//   P3_ASSIGN_OR_RETURN(p3::pipeline::RunResult result,
//                       p3::pipeline::RunPipeline(config, options));
//   std::cout << result.ToJson() << "\n";
//
// Thread-compatible; the run owns its threads and joins them before returning.
#ifndef P3_PIPELINE_RUNNER_H_
#define P3_PIPELINE_RUNNER_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "p3/pipeline/run_result.h"
#include "proto/config.pb.h"

namespace p3::pipeline {

struct RunOptions {
  // Where PROGRESS (p3/base/progress.h) and EPOCH (FormatEpochLine()) lines go; null for
  // none. Default: none.
  std::ostream* progress = nullptr;
};

// `config` must be loaded with proto/config.h (defaults filled, validated) and have mode
// "pipeline". Errors: the data set's or model's, an InvalidArgumentError for boundaries
// that do not fit the model or a device that is not present, the engine's on failure.
absl::StatusOr<RunResult> RunPipeline(const config::ExperimentConfig& config,
                                      const RunOptions& options);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_RUNNER_H_
