// pipeline_train: trains one experiment config in mode "pipeline" (docs/pipeline.md).
//
//   bazel-bin/tools/pipeline_train --config=configs/pipeline_spectrain.textproto
//       --set=pipeline.stages=4 --set=pipeline.weights=pipedream \
//       --result_file=out/x/result.json --epochs_file=out/x/epochs.csv
//
// Prints PROGRESS and EPOCH lines and a final "RESULT {json}" line on stdout; exits 2 for
// a bad config, 1 when the run fails, with the reason on stderr.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "p3/pipeline/runner.h"
#include "proto/config.h"

ABSL_FLAG(std::string, config, "", "experiment config (text format), mode \"pipeline\"");
ABSL_FLAG(std::string, result_file, "", "where to write the result JSON");
ABSL_FLAG(std::string, epochs_file, "", "where to write the per-epoch records (CSV)");

namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.good()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --set=field.path=value may repeat (absl's list flags keep only the last): take them
  // out before absl parses the rest.
  std::vector<std::string> overrides;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i > 0 && arg.rfind("--set=", 0) == 0) {
      overrides.push_back(arg.substr(6));
    } else {
      rest.push_back(argv[i]);
    }
  }
  absl::ParseCommandLine(static_cast<int>(rest.size()), rest.data());
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
  p3::pipeline::RunOptions options;
  options.progress = &std::cout;
  absl::StatusOr<p3::pipeline::RunResult> result = p3::pipeline::RunPipeline(*config, options);
  if (!result.ok()) {
    std::cerr << "pipeline_train: " << result.status() << "\n";
    return 1;
  }
  if (!WriteFile(absl::GetFlag(FLAGS_result_file), result->ToJson() + "\n") ||
      !WriteFile(absl::GetFlag(FLAGS_epochs_file), result->EpochsCsv())) {
    std::cerr << "pipeline_train: cannot write the result files\n";
    return 1;
  }
  std::cout << "RESULT " << result->ToJson() << std::endl;
  return 0;
}
