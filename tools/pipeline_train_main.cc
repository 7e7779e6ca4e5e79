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
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "p3/base/file_util.h"
#include "p3/pipeline/runner.h"
#include "proto/config.h"

ABSL_FLAG(std::string, config, "", "experiment config (text format), mode \"pipeline\"");
ABSL_FLAG(std::string, result_file, "", "where to write the result JSON");
ABSL_FLAG(std::string, epochs_file, "", "where to write the per-epoch records (CSV)");

namespace {

// Writes `contents` to `path` unless the path is empty (the flag not given).
absl::Status WriteIfRequested(const std::string& path, const std::string& contents) {
  if (path.empty()) return absl::OkStatus();
  return p3::WriteFileAtomically(path, contents);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> overrides = p3::config::TakeOverrideFlags(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_config).empty()) {
    std::cerr << "pipeline_train: --config=PATH is required\n";
    return 2;
  }
  absl::StatusOr<p3::config::ExperimentConfig> config =
      p3::config::LoadConfig(absl::GetFlag(FLAGS_config), overrides);
  if (!config.ok()) {
    std::cerr << "pipeline_train: " << config.status().message() << "\n";
    return 2;
  }
  if (config->mode() != "pipeline") {
    std::cerr << "pipeline_train: mode is \"" << config->mode()
              << "\"; this binary runs mode \"pipeline\" (use --set=mode=pipeline)\n";
    return 2;
  }
  // Process-wide: this (main) thread profiles the blocks and evaluates; each stage
  // thread sets its own count from the same field (PipelineOptions::threads_per_stage).
  if (config->training().threads() > 0) torch::set_num_threads(config->training().threads());
  p3::pipeline::RunOptions options;
  options.progress = &std::cout;
  absl::StatusOr<p3::pipeline::RunResult> result = p3::pipeline::RunPipeline(*config, options);
  if (!result.ok()) {
    std::cerr << "pipeline_train: " << result.status() << "\n";
    return 1;
  }
  for (const absl::Status& written :
       {WriteIfRequested(absl::GetFlag(FLAGS_result_file), result->ToJson() + "\n"),
        WriteIfRequested(absl::GetFlag(FLAGS_epochs_file), result->EpochsCsv())}) {
    if (!written.ok()) {
      std::cerr << "pipeline_train: " << written.message() << "\n";
      return 1;
    }
  }
  std::cout << "RESULT " << result->ToJson() << std::endl;
  return 0;
}
