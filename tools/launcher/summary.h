// The results of a run: reading the workers' result files, summary.json, and the table
// printed at the end; which process failed first and which failures followed; where each
// worker's iterations went (compute vs waiting) and the straggler. JSON is read and
// written with nlohmann/json; member order is kept.
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

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
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

// How one server or worker process ended: from the launcher's supervisor, or after a
// Slurm job from the exit record its task script wrote (tools/p3_slurm_task.sh).
struct ProcessOutcome {
  std::string name;  // "server_1"
  // Where it ran (Slurm node); "" when not known. Default: "".
  std::string node;
  bool started = false;
  // Started and ended; false while it runs, or when no exit record says how it ended.
  bool ended = false;
  int exit_status = 0;  // When it exited (signal == 0).
  int signal = 0;       // The signal that ended it; 0: it exited.
  // Seconds since the Unix epoch; end_unix only when ended.
  double start_unix = 0;
  double end_unix = 0;
  // Ended after the launcher had begun stopping the processes (sent SIGTERM), or, after a
  // Slurm job, was ended by SIGTERM / SIGKILL after another process had failed (srun
  // --kill-on-bad-exit). Default: false.
  bool stopped = false;
  // A process that exited non-zero: the last line of its log, its own error message.
  // Default: "".
  std::string last_log_line;
  // When it last wrote to its log (seconds since the Unix epoch); 0: unknown. A process
  // that exits with an error prints it first (process contract), so for such a process
  // this is when it gave up, more precisely than end_unix (when the launcher reaped it).
  double last_output_unix = 0;
  // What status() says of a started process that has not ended. Default: "running".
  std::string unended_status = "running";

  // Exited non-zero or was killed.
  bool failed() const { return ended && (signal != 0 || exit_status != 0); }
  // "exit 0", "signal 9 (Killed)", "not started", or unended_status.
  std::string status() const;
};

// Which process failed first, and which failures followed.
struct FailureRanking {
  // Index in the outcomes of the first failure; -1 when none failed.
  int first = -1;
  // The other failed processes, in the order below; processes the launcher stopped with
  // SIGTERM or SIGKILL are not among them (they did not fail on their own).
  std::vector<int> follow_on;
};

// The launcher learns of a process's end when it reaps it, some milliseconds later under
// load; processes that ended within this of the earliest failure (a dead server, the
// workers that lost it, the server that lost those workers: a cascade of a millisecond or
// two) may have ended in either order.
inline constexpr double kSimultaneousSeconds = 0.1;

// A process whose error says "worker R disconnected" is ranked after worker R's own
// failure if the two ended within this of each other: R's exit (or its own error) closed
// the stream, whichever the launcher reaped first.
inline constexpr double kNamedPeerSeconds = 1.0;

// The first failure, then the others. Failures ending within kSimultaneousSeconds of the
// earliest one are ordered: first those killed from outside (SIGKILL, SIGTERM, SIGINT,
// SIGHUP, SIGQUIT: they died without warning, their peers then fail naming them), then
// by when each gave up — for an exit with an error status the time of its last output
// (its error message) if earlier than its end, else its end — then the given order.
// Later failures follow by that same time. Then a failure whose last log line says that
// worker R disconnected (a server's error, or a worker's relayed Abort) moves after worker
// R's own failure when both ended within kNamedPeerSeconds. Pure: tested without processes.
FailureRanking RankFailures(const std::vector<ProcessOutcome>& outcomes);

// What the launcher prints after a failure, one line each (without "[p3] "):
//   first failure: server 1 (signal 9 (Killed)) after 3.2 s; the errors below follow from it
//     follow-on: worker 1 (exit 1) 0.012 s later: p3_worker 1: UNAVAILABLE: ...
//     stopped after the first failure: worker_0, server_0
// `start_unix` is when the run started. Empty when nothing failed.
std::vector<std::string> FailureReportLines(const std::vector<ProcessOutcome>& outcomes,
                                            const FailureRanking& ranking, double start_unix);

// A Slurm task's exit record (results/<name>.exit.json, tools/p3_slurm_task.sh) as an
// ended ProcessOutcome. InvalidArgument naming what is wrong.
absl::StatusOr<ProcessOutcome> ParseExitRecord(absl::string_view text);

// Where a worker's iterations went: the mean per iteration over its records.
struct WorkerTiming {
  int rank = 0;
  int64_t iterations = 0;        // Rows of its records file.
  double iteration_seconds = 0;  // Mean iteration_seconds.
  // Waiting for parameters: the result's forward_wait_seconds / iterations; nullopt when
  // the result has no forward_wait_seconds (then compute_seconds is the whole iteration).
  std::optional<double> wait_seconds;
  // The rest of the iteration: forward and backward, handing gradients to the send queue.
  double compute_seconds = 0;
};

// A worker's timing from its result and the text of its records CSV (a header with an
// iteration_seconds column, then one row per iteration). InvalidArgument naming the
// problem when the records have no such column, no rows or a bad number.
absl::StatusOr<WorkerTiming> WorkerTimingFrom(const nlohmann::ordered_json& result,
                                              absl::string_view records_csv);

// Index of the straggler: the worker with the most compute per iteration (in synchronous
// training the others wait for it); -1 with fewer than two timings.
int Straggler(const std::vector<WorkerTiming>& timings);

// "slowest worker (per iteration): worker 1, 0.031 s compute + 0.002 s waiting (fastest:
// worker 0, 0.011 s compute + 0.022 s waiting)"; "" with fewer than two timings.
std::string StragglerLine(const std::vector<WorkerTiming>& timings);

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
  // Each worker's result, by rank; rank 0's numbers are the cluster's. Required: one,
  // unless the run failed or ran a worker program (then the results that were written,
  // maybe none).
  std::vector<nlohmann::ordered_json> worker_results;
  // Every process and how it ended, servers first; empty: no "processes" member.
  // Default: empty.
  std::vector<ProcessOutcome> processes;
  // When the run started (seconds since the Unix epoch), for the failures' times.
  double start_unix = 0;
  // The run failed: "status" is "failed" and first_failure / follow_on_failures name
  // the failures (RankFailures over `processes`). Default: false ("status": "ok").
  bool failed = false;
  // With `failed`: what failed the run, as the launcher reported it (its first line).
  // Default: "".
  std::string error;
  // Each worker's timing, by rank ("worker_timing", and "straggler" with two or more).
  // Default: none.
  std::vector<WorkerTiming> timings;
  // A "network" member (the emulated network and its measured links). Default: false.
  bool network = false;
  std::vector<LinkMeasurement> links_checked;
  // The emulated machines' TCP congestion control (ResolveCongestionControl); empty:
  // not known, left out. Default: empty.
  std::string congestion_control;
  // --hosts destinations; empty: no "hosts" member. Default: empty.
  std::vector<std::string> hosts;
  // The automatic slice size and credit search (tools/launcher/tuning.h); null: no
  // "tuning" member. Default: null.
  nlohmann::ordered_json tuning;
  // The config's worker.command, when the workers ran a program of the user's own; empty:
  // p3_worker, no "worker_program" member. Default: empty.
  std::string worker_command;
  // With worker_command: the workers whose program wrote no result file ("worker_1"),
  // listed in "worker_program" instead of failing the run. Default: none.
  std::vector<std::string> results_missing;
};

// summary.json's object, members in the documented order (docs/launcher.md): "status"
// first, the run's figures (null without rank 0's result: after a failure, or from a
// worker program that wrote none), worker_program (with worker_command), then
// processes, error, first_failure and follow_on_failures (after a failure), worker_timing,
// straggler, workers_results.
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
