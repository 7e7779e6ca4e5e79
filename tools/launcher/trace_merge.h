// Merging the Chrome trace-event JSON files of a run's processes into one timeline.
//
// Each worker and server writes its own trace (p3/base/trace.h) with a distinct pid (workers
// 100 + rank, servers 200 + index); timestamps are microseconds of the wall clock, so the
// files merge by concatenating their `traceEvents` arrays. Every event is kept, metadata
// events such as process_name / thread_name included, with its members in file order
// (parsed and written again by nlohmann/json: only the spacing changes). The input may be
// the JSON Object Format ({"traceEvents": [...], ...}) or the JSON Array Format ([...]);
// the output is always the Object Format, one event per line, which Perfetto
// (https://ui.perfetto.dev) and chrome://tracing open.
//
// Example:
//   absl::StatusOr<p3::tools::TraceMergeStats> stats = p3::tools::MergeTraceFiles(
//       {"out/x/traces/worker_0.json", "out/x/traces/server_0.json"}, "out/x/trace.json");
//   if (!stats.ok()) std::cerr << stats.status().message() << "\n";
//   else std::cout << stats->events << " events\n";
//
// Thread-compatible; no state.
#ifndef P3_TOOLS_LAUNCHER_TRACE_MERGE_H_
#define P3_TOOLS_LAUNCHER_TRACE_MERGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace p3::tools {

// One parsed trace file: its events as compact JSON texts, in file order.
struct TraceEvents {
  std::vector<std::string> events;
  // Sum of otherData.dropped_events (events a recorder dropped at its limit). Default: 0.
  int64_t dropped_events = 0;
};

// What MergeTraceFiles() wrote.
struct TraceMergeStats {
  int files = 0;
  int64_t events = 0;
  int64_t dropped_events = 0;
};

// Parses one trace in the Object or the Array Format. The JSON must be well formed and
// every event must be an object; errors say where (byte offset of a syntax error, index
// of an event that is not an object) and what was expected.
absl::StatusOr<TraceEvents> ParseTraceEvents(absl::string_view json);

// Reads every file in `inputs` (errors name the file), and writes one trace with all
// their events to `output` atomically (p3::WriteFileAtomically). An input that cannot be
// read or parsed is an error: nothing is written.
absl::StatusOr<TraceMergeStats> MergeTraceFiles(const std::vector<std::string>& inputs,
                                                const std::string& output);

}  // namespace p3::tools

#endif  // P3_TOOLS_LAUNCHER_TRACE_MERGE_H_
