// pipeline_train: trains one experiment config in mode "pipeline" (docs/pipeline.md).
//
//   (one command, wrapped here)
//   bazel-bin/tools/pipeline_train --config=configs/pipeline_spectrain.textproto
//       --set=pipeline.stages=4 --set=pipeline.weights=pipedream
//       --result_file=out/x/result.json --epochs_file=out/x/epochs.csv
//
// Prints PROGRESS and EPOCH lines and a final "RESULT {json}" line on stdout; exits 2 for
// a bad config, 1 when the run fails, with the reason on stderr.
#include <torch/utils.h>

#include <iostream>
#include <string>

#include "models/compute_device.h"
#include "absl/flags/flag.h"
#include "p3/pipeline/runner.h"
#include "proto/config.h"
#include "proto/program.h"

ABSL_FLAG(std::string, config, "", "experiment config (text format), mode \"pipeline\"");
ABSL_FLAG(std::string, result_file, "", "where to write the result JSON");
ABSL_FLAG(std::string, epochs_file, "", "where to write the per-epoch records (CSV)");

int main(int argc, char** argv) {
  p3::Program program("pipeline_train", argc, argv, {.config_overrides = true});
  absl::StatusOr<p3::config::ExperimentConfig> config =
      program.LoadConfig(absl::GetFlag(FLAGS_config));
  if (!config.ok()) return program.Fail(2, config.status().message());
  if (config->mode() != p3::config::kPipelineMode) {
    return program.Fail(2, "mode is \"" + config->mode() +
                               "\"; this binary runs mode \"pipeline\" (use --set=mode=pipeline)");
  }
  // Process-wide: this (main) thread profiles the blocks and evaluates; each stage
  // thread sets its own count from the same field (PipelineOptions::threads_per_stage).
  if (config->training().threads() > 0) torch::set_num_threads(config->training().threads());
  if (config->training().has_tf32()) p3::SetTf32(config->training().tf32());
  p3::pipeline::RunOptions options;
  options.progress = &std::cout;
  absl::StatusOr<p3::pipeline::RunResult> result = p3::pipeline::RunPipeline(*config, options);
  if (!result.ok()) return program.Fail(1, result.status().ToString());
  for (const absl::Status& written :
       {p3::WriteRequestedFile(absl::GetFlag(FLAGS_result_file), result->ToJson() + "\n"),
        p3::WriteRequestedFile(absl::GetFlag(FLAGS_epochs_file), result->EpochsCsv())}) {
    if (!written.ok()) return program.Fail(1, written.message());
  }
  std::cout << "RESULT " << result->ToJson() << std::endl;
  return 0;
}
