// What the Launcher makes of a run that ended: the workers' results and the Slurm exit
// records read back, how each process ended, summary.json, the end table, the merged
// trace, the failure report and the curves.
#include "tools/launcher/launcher.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "p3/base/file_util.h"
#include "tools/launcher/summary.h"
#include "tools/launcher/trace_merge.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

}  // namespace

absl::Status Launcher::ReadResults() {
  absl::Status first_problem;
  for (Child& child : children_) {
    if (child.role != "worker" || child.result.has_value()) continue;
    absl::StatusOr<std::string> text = ReadFile(child.result_file);
    if (!text.ok() && (config_.worker().has_command() || child.gone)) {
      // A worker program may leave P3_RESULT_FILE unwritten; summary.json says so. A gone
      // worker of an elastic run (not present at the restart's checkpoint) wrote none.
      continue;
    }
    if (!text.ok()) {
      first_problem.Update(FailureOf(
          child,
          absl::StrCat("exited with status 0 but wrote no result file ", child.result_file)));
      continue;
    }
    absl::StatusOr<nlohmann::ordered_json> result = ParseWorkerResult(*text);
    if (!result.ok()) {
      first_problem.Update(
          FailureOf(child, absl::StrCat("wrote a result file ", result.status().message(), ": ",
                                        child.result_file)));
      continue;
    }
    child.result = *std::move(result);
  }
  return first_problem;
}

void Launcher::ReadExitRecords() {
  for (Child& child : children_) {
    const std::string path =
        (fs::path(output_dir_) / "results" / (child.name() + ".exit.json")).string();
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) continue;
    absl::StatusOr<ProcessOutcome> record = ParseExitRecord(*text);
    if (!record.ok()) {
      Say(absl::StrCat("warning: ignoring ", path, ": ", record.status().message()));
      continue;
    }
    child.recorded = *std::move(record);
  }
}

std::vector<ProcessOutcome> Launcher::Outcomes() const {
  std::vector<ProcessOutcome> outcomes;
  for (const Child& child : children_) {
    ProcessOutcome outcome;
    if (child.recorded.has_value()) outcome = *child.recorded;
    outcome.name = child.name();
    if (const ProcessState* state = StateOf(child); state != nullptr) {
      outcome.started = true;
      outcome.ended = !state->running;
      outcome.start_unix = absl::ToDoubleSeconds(state->start_time - absl::UnixEpoch());
      if (outcome.ended) {
        outcome.end_unix = absl::ToDoubleSeconds(state->end_time - absl::UnixEpoch());
        outcome.stopped = state->end_time >= stop_started_;
        const int wait_status = state->wait_status;
        outcome.exit_status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 0;
        outcome.signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
      }
    } else if (!child.recorded.has_value()) {
      // Collect() without an exit record (a task killed with SIGKILL, or a folder left by
      // an older task script): what its files show.
      std::error_code error;
      outcome.started = fs::exists(child.log_path, error);
      outcome.unended_status = child.result.has_value()             ? "result file"
                               : fs::exists(child.port_file, error) ? "port file, no exit record"
                                                                    : "no exit record";
    }
    if (struct stat log_stat; outcome.failed() && stat(child.log_path.c_str(), &log_stat) == 0) {
      outcome.last_output_unix = static_cast<double>(log_stat.st_mtim.tv_sec) +
                                 static_cast<double>(log_stat.st_mtim.tv_nsec) * 1e-9;
    }
    if (outcome.failed() && outcome.signal == 0) {
      // Its own last words: the error it printed before exiting (for follow-on errors,
      // naming its peer). A killed process's last line is no error of its.
      const std::string tail = TailOfFile(child.log_path, 1);
      outcome.last_log_line = std::string(absl::StripAsciiWhitespace(tail));
    }
    outcomes.push_back(outcome);
  }
  if (supervisor_ == nullptr) {
    // After a Slurm job: srun ends the step's other tasks with SIGTERM / SIGKILL once one
    // fails (--kill-on-bad-exit); such an end after another failure is not a failure of
    // its own.
    double earliest_failure = std::numeric_limits<double>::infinity();
    for (const ProcessOutcome& outcome : outcomes) {
      if (outcome.failed()) earliest_failure = std::min(earliest_failure, outcome.end_unix);
    }
    // srun sends SIGTERM first and SIGKILL only KillWait seconds later (Slurm's default
    // 30), so a SIGKILL within a second of the first failure came from elsewhere: the
    // exit records' clocks cannot order a killed process and the peers that failed
    // because of it within a few milliseconds (its task script records the end after
    // waking up), and such a process is a failure, not one that srun stopped.
    constexpr double kSrunKillAfterSeconds = 1.0;
    for (ProcessOutcome& outcome : outcomes) {
      outcome.stopped =
          outcome.failed() && outcome.end_unix > earliest_failure &&
          (outcome.signal == SIGTERM ||
           (outcome.signal == SIGKILL &&
            outcome.end_unix > earliest_failure + kSrunKillAfterSeconds));
    }
  }
  return outcomes;
}

std::vector<WorkerTiming> Launcher::Timings() const {
  std::vector<WorkerTiming> timings;
  for (const Child& child : children_) {
    if (child.role != "worker" || !child.result.has_value()) continue;
    absl::StatusOr<std::string> records = ReadFile(child.records_file);
    if (!records.ok()) continue;
    absl::StatusOr<WorkerTiming> timing = WorkerTimingFrom(*child.result, *records);
    if (timing.ok()) timings.push_back(*timing);
  }
  return timings;
}

void Launcher::ReportFailure(const absl::Status& failure) {
  const std::vector<ProcessOutcome> outcomes = Outcomes();
  const double start_unix = absl::ToDoubleSeconds(start_time_ - absl::UnixEpoch());
  std::vector<std::string> lines = FailureReportLines(outcomes, RankFailures(outcomes), start_unix);
  for (const std::string& line : lines) std::cerr << "[p3] " << line << "\n";
  if (summary_path_.empty()) return;
  ReadResults().IgnoreError();  // Whatever results there are, for the summary.
  const absl::Status written = WriteSummary(failure);
  if (written.ok()) {
    std::cerr << "[p3] summary (status \"failed\"): " << summary_path_ << "\n";
  } else {
    std::cerr << "[p3] cannot write " << summary_path_ << ": " << written.message() << "\n";
  }
}

void Launcher::DrawCurves() {
  if (options_.plot_command.empty()) return;
  if (access(options_.plot_command[0].c_str(), X_OK) != 0) {
    Say(absl::StrCat("no curves drawn: ", options_.plot_command[0], " is not there"));
    return;
  }
  std::vector<std::string> argv = options_.plot_command;
  argv.push_back(output_dir_);
  const absl::Status drawn = RunCommand(argv);
  if (drawn.ok()) {
    Say(absl::StrCat("curves: ", (std::filesystem::path(output_dir_) / "curves.png").string()));
  } else {
    Say(absl::StrCat("no curves drawn: ", drawn.message()));
  }
}

absl::Status Launcher::WriteSummary(const absl::Status& failure) {
  SummaryInput input;
  input.failed = !failure.ok();
  input.error = std::string(failure.message());
  input.processes = Outcomes();
  input.start_unix = absl::ToDoubleSeconds(start_time_ - absl::UnixEpoch());
  input.timings = Timings();
  input.config = &config_;
  input.config_path = config_out_;
  input.output_dir = output_dir_;
  input.trace_path = trace_path_;
  input.launcher_wall_seconds = absl::ToDoubleSeconds(absl::Now() - start_time_);
  for (const Child& child : children_) {
    if (child.role == "worker" && child.result.has_value()) {
      input.worker_results.push_back(*child.result);
    }
  }
  input.network = network_ != nullptr || !link_checks_.empty();
  input.links_checked = link_checks_;
  input.congestion_control = congestion_control_;
  for (const Host& host : options_.hosts) input.hosts.push_back(host.destination);
  input.tuning = options_.tuning;
  if (config_.worker().has_command()) {
    input.worker_command = config_.worker().command();
    for (const Child& child : children_) {
      if (child.role == "worker" && !child.result.has_value()) {
        input.results_missing.push_back(child.name());
      }
    }
  }
  return WriteFileAtomically(summary_path_, SummaryText(BuildSummary(input)));
}

void Launcher::PrintTable() {
  const nlohmann::ordered_json no_result = nlohmann::ordered_json::object();
  // Collect(): no supervisor; how each process ended is what its Slurm exit record (or,
  // without one, its files) shows.
  const std::vector<ProcessOutcome> outcomes =
      supervisor_ == nullptr ? Outcomes() : std::vector<ProcessOutcome>();
  std::vector<TableRow> rows;
  for (size_t i = 0; i < children_.size(); ++i) {
    const Child& child = children_[i];
    TableRow row;
    row.name = child.name();
    row.status = child.result.has_value() ? "result file" : "not started";
    if (i < outcomes.size()) {
      const ProcessOutcome& outcome = outcomes[i];
      row.status = outcome.status();
      if (!outcome.node.empty()) absl::StrAppend(&row.status, " on ", outcome.node);
      if (outcome.ended) row.seconds = outcome.end_unix - outcome.start_unix;
    }
    const ProcessState* state = StateOf(child);
    if (state != nullptr) {
      row.pid = state->pid;
      row.status = state->running ? "running" : ShortStatus(DescribeWaitStatus(state->wait_status));
      const absl::Time end = state->running ? absl::Now() : state->end_time;
      row.seconds = absl::ToDoubleSeconds(end - state->start_time);
    }
    if (child.role == "worker") row.result = child.result.has_value() ? &*child.result : &no_result;
    rows.push_back(row);
  }
  std::cout << FormatTable(rows) << std::flush;
}

void Launcher::MergeTraces() {
  if (!config_.trace()) return;
  std::vector<std::string> inputs;
  std::vector<std::string> missing;
  for (const Child& child : children_) {
    if (child.trace_file.empty()) continue;
    std::error_code error;
    if (fs::exists(child.trace_file, error)) {
      inputs.push_back(child.trace_file);
    } else {
      missing.push_back(child.name());
    }
  }
  if (inputs.empty()) {
    Say(absl::StrCat("no process wrote a trace (", output_dir_, "/traces is empty)"));
    return;
  }
  const std::string path = (fs::path(output_dir_) / "trace.json").string();
  absl::StatusOr<TraceMergeStats> stats = MergeTraceFiles(inputs, path);
  if (!stats.ok()) {
    Say(absl::StrCat("warning: cannot merge the traces: ", stats.status().message()));
    return;
  }
  trace_path_ = path;
  Say(absl::StrCat(
      "merged the traces: ", stats->events, " events from ", stats->files, " process(es)",
      missing.empty() ? "" : " (none from " + absl::StrJoin(missing, ", ") + ")",
      stats->dropped_events > 0
          ? absl::StrCat(", ", stats->dropped_events, " dropped at the recorders' limit")
          : "",
      "; open trace.json in https://ui.perfetto.dev or chrome://tracing"));
}

}  // namespace p3::tools::launcher
