// What an experiment config in mode "pipeline" (proto/config.proto's `pipeline`,
// `optimizer` and `training` sections) asks of the pipeline engine and of the run's
// loop: the one translation of the config for the runner (runner.h).
//
// Example:
//   P3_ASSIGN_OR_RETURN(PipelineOptions options, PipelineOptionsFromConfig(config));
//   const int64_t total = RunIterations(config, sampler.iterations_per_epoch());
//
// Stateless and thread-safe. `config` must have its defaults filled (proto/config.h).
#ifndef P3_PIPELINE_RUN_CONFIG_H_
#define P3_PIPELINE_RUN_CONFIG_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "p3/pipeline/engine_options.h"
#include "proto/config.pb.h"

namespace p3::pipeline {

// mode (pipeline.weights), spectrain_version, num_stages, devices ("cpu" for each stage
// when none are given), boundaries (pipeline.boundaries; empty: the runner chooses),
// sgd (optimizer.lr, momentum, weight_decay, nesterov, schedule) and threads_per_stage
// (training.threads). No callbacks. InvalidArgumentError for an unknown weight mode.
absl::StatusOr<PipelineOptions> PipelineOptionsFromConfig(const config::ExperimentConfig& config);

// Mini-batches of the run: training.iterations when > 0, else training.epochs times
// `per_epoch`.
int64_t RunIterations(const config::ExperimentConfig& config, int64_t per_epoch);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_RUN_CONFIG_H_
