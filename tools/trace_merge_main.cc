// trace_merge: merges Chrome trace-event JSON files into one (tools/launcher/trace_merge.h).
//
//   bazel-bin/tools/trace_merge_tool --output=trace.json traces/worker_0.json traces/server_0.json
//
// launch_cluster does this itself after a run with `trace: true`; this tool is for traces
// collected by hand (e.g. from Kubernetes pods or Slurm nodes, docs/multihost.md).
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/launcher/trace_merge.h"

ABSL_FLAG(std::string, output, "trace.json", "Merged trace to write.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("trace_merge_tool --output=OUT.json IN.json [IN.json ...]");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> inputs(positional.begin() + 1, positional.end());
  if (inputs.empty()) {
    std::cerr << "trace_merge: no input files; usage: trace_merge --output=OUT.json IN.json ...\n";
    return 2;
  }
  absl::StatusOr<p3::tools::TraceMergeStats> stats =
      p3::tools::MergeTraceFiles(inputs, absl::GetFlag(FLAGS_output));
  if (!stats.ok()) {
    std::cerr << "trace_merge: " << stats.status().message() << "\n";
    return 1;
  }
  std::cout << "trace_merge: " << stats->events << " events from " << stats->files << " files -> "
            << absl::GetFlag(FLAGS_output) << "\n";
  return 0;
}
