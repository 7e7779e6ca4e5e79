// The results of a run: reading the workers' result files, summary.json, and the table
// printed at the end. JSON is read and written with nlohmann/json; member order is kept.
//
// Example:
//   absl::StatusOr<nlohmann::ordered_json> result = ParseWorkerResult(text);
//   SummaryInput input;
//   input.config = &config;
//   input.worker_results = {*result};
//   ...
//   P3_RETURN_IF_ERROR(p3::WriteFileAtomically(path, SummaryText(BuildSummary(input))));
//
// Stateless; thread-compatible.
#ifndef P3_TOOLS_LAUNCHER_SUMMARY_H_
#define P3_TOOLS_LAUNCHER_SUMMARY_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"
#include "tools/launcher/netem.h"

namespace p3::tools::launcher {

// The members every worker result must have (docs/launcher.md, process contract).
extern const char* const kRequiredResultKeys[7];

// A worker's result file: a JSON object with every kRequiredResultKeys member.
// InvalidArgument "that is not a JSON object (<parser's reason>)" or
// "without \"<key>\"" (completing "wrote a result file ...").
absl::StatusOr<nlohmann::ordered_json> ParseWorkerResult(absl::string_view text);

// Everything summary.json is made of.
struct SummaryInput {
  // The resolved config. Not owned; required.
  const config::ExperimentConfig* config = nullptr;
  // Absolute paths of the resolved config and of the output folder.
  std::string config_path;
  std::string output_dir;
  // trace.json, when one was written; empty: no "trace" member. Default: empty.
  std::string trace_path;
  // The launcher's run time.
  double launcher_wall_seconds = 0;
  // Each worker's result, by rank; rank 0's numbers are the cluster's. Required: one.
  std::vector<nlohmann::ordered_json> worker_results;
  // A "network" member (the emulated network and its measured links). Default: false.
  bool network = false;
  std::vector<LinkMeasurement> links_checked;
  // --hosts destinations; empty: no "hosts" member. Default: empty.
  std::vector<std::string> hosts;
};

// summary.json's object, members in the documented order (docs/launcher.md).
nlohmann::ordered_json BuildSummary(const SummaryInput& input);

// `summary` indented by two spaces, with a final newline.
std::string SummaryText(const nlohmann::ordered_json& summary);

// A number for people: integers without a fraction ("12"), others as JSON writes them
// ("0.3121"); non-numbers as JSON text.
std::string NumberText(const nlohmann::ordered_json& value);

// One row of the end table.
struct TableRow {
  std::string name;  // "worker_0"
  int pid = 0;       // <= 0: never started ("-").
  // "running", "exit 0", "signal 15 (Terminated)", "not started", "result file".
  std::string status;
  double seconds = 0;
  // Workers: their result (iterations, samples/s, final loss, test accuracy); null for
  // servers (blank columns). A missing or non-numeric member shows as "-".
  const nlohmann::ordered_json* result = nullptr;
};

// The table: a header line and one line per row, trailing blanks stripped.
std::string FormatTable(const std::vector<TableRow>& rows);

// DescribeWaitStatus() text shortened for the table ("exit 3", "signal 9 (Killed)").
std::string ShortStatus(const std::string& description);

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_SUMMARY_H_
