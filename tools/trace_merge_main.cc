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
#include "proto/program.h"
#include "tools/launcher/trace_merge.h"

ABSL_FLAG(std::string, output, "trace.json", "Merged trace to write.");

int main(int argc, char** argv) {
  p3::Program program("trace_merge", argc, argv,
                      {.usage = "trace_merge_tool --output=OUT.json IN.json [IN.json ...]"});
  const std::vector<std::string>& inputs = program.arguments();
  if (inputs.empty()) {
    return program.Fail(2, "no input files; usage: trace_merge --output=OUT.json IN.json ...");
  }
  absl::StatusOr<p3::tools::TraceMergeStats> stats =
      p3::tools::MergeTraceFiles(inputs, absl::GetFlag(FLAGS_output));
  if (!stats.ok()) return program.Fail(1, stats.status().message());
  std::cout << "trace_merge: " << stats->events << " events from " << stats->files << " files -> "
            << absl::GetFlag(FLAGS_output) << "\n";
  return 0;
}
