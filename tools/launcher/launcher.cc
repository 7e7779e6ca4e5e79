#include "tools/launcher/launcher.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "p3/core/checkpoint.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"
#include "proto/config.h"
#include "tools/launcher/backends.h"
#include "tools/launcher/network_setup.h"
#include "tools/launcher/run_layout.h"
#include "tools/launcher/summary.h"
#include "tools/launcher/trace_merge.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

ProgressDisplay::Options DisplayOptions(const LauncherOptions& options) {
  ProgressDisplay::Options display;
  display.live = options.live_progress;
  return display;
}

}  // namespace

std::string Launcher::Child::label() const {
  return host != nullptr ? absl::StrCat(role, " ", index, " on ", host->destination)
                         : absl::StrCat(role, " ", index);
}

Launcher::Launcher(LauncherOptions options, config::ExperimentConfig config)
    : options_(std::move(options)),
      config_(std::move(config)),
      display_(DisplayOptions(options_)) {}

Launcher::~Launcher() {
  // Every process first (they may run in the network), then the network.
  supervisor_.reset();
  network_.reset();
}

const ProcessState* Launcher::StateOf(const Child& child) const {
  if (supervisor_ == nullptr || child.id < 0) return nullptr;
  return &supervisor_->process(child.id);
}

bool Launcher::Running(const Child& child) const {
  const ProcessState* state = StateOf(child);
  return state != nullptr && state->running;
}

int Launcher::PidOf(const Child& child) const {
  const ProcessState* state = StateOf(child);
  return state != nullptr ? state->pid : -1;
}

absl::Status Launcher::PrepareOutputDir(bool clear_stale, bool write_config) {
  const bool emulated = config::NetworkEmulated(config_) && options_.hosts.empty();
  RunLayoutOptions layout_options;
  layout_options.working_dir = options_.working_dir;
  layout_options.machines = !options_.hosts.empty() ? static_cast<int>(options_.hosts.size())
                                                    : (emulated ? config_.network().machines() : 1);
  layout_options.clear_stale = clear_stale;
  P3_ASSIGN_OR_RETURN(const RunLayout layout, MakeRunLayout(config_, layout_options));
  output_dir_ = layout.output_dir;
  config_out_ = layout.config_path;
  summary_path_ = layout.summary_path;
  for (const ProcessFiles& files : layout.processes) {
    Child child;
    static_cast<ProcessFiles&>(child) = files;
    if (!options_.hosts.empty()) child.host = &options_.hosts[child.machine];
    children_.push_back(child);
  }
  if (!write_config) return absl::OkStatus();

  std::string text = absl::StrCat(
      "# Resolved experiment config written by launch_cluster: defaults filled, overrides\n"
      "# applied. Source: ",
      options_.config_path, "\n");
  for (const std::string& override_text : options_.overrides) {
    absl::StrAppend(&text, "# --set=", override_text, "\n");
  }
  config::ExperimentConfig written = config_;
  if (!options_.hosts.empty() && !options_.remote_output_dir.empty() &&
      config_.output().save_model() && config_.output().model_file().empty()) {
    // No shared folder: rank 0 writes the model into the remote output folder, from
    // where FetchRemoteModel copies it here.
    written.mutable_output()->set_model_file(
        RemotePath((fs::path(output_dir_) / "model.pt").string()));
  }
  absl::StrAppend(&text, config::ConfigToText(written));
  config_text_ = text;
  return WriteFileAtomically(config_out_, text);
}

absl::Status Launcher::StartProcess(Child& child, const std::string& binary,
                                    const std::vector<std::string>& args) {
  ProcessSpec spec;
  spec.argv = {binary};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.log_path = child.log_path;
  spec.append_log = child.restarts > 0;
  spec.ns_path = child.ns_path;
  spec.label = child.label();
  if (child.host != nullptr) {
    // Over ssh: the remote script creates the folders, writes the config, runs the
    // process, and stops it when ssh's stdin (a pipe the supervisor holds) closes.
    RemoteProcess remote;
    const std::string remote_out = RemotePath(output_dir_);
    for (const char* sub : {"logs", "ports", "results", "records", "traces"}) {
      remote.directories.push_back(absl::StrCat(remote_out, "/", sub));
    }
    remote.config_text = config_text_;
    remote.config_path = RemotePath(config_out_);
    remote.working_directory = options_.working_dir;
    remote.argv = spec.argv;
    remote.tag = child.name();
    spec.argv = SshArgv(options_.ssh_command, *child.host, RemoteScript(remote));
    spec.stdin_pipe = true;
  }
  P3_ASSIGN_OR_RETURN(child.id, supervisor_->Start(spec));
  return absl::OkStatus();
}

absl::Status Launcher::Interrupted() const {
  if (supervisor_ == nullptr || supervisor_->interrupt_signal() == 0) return absl::OkStatus();
  return supervisor_->InterruptedError();
}

absl::Status Launcher::FailureOf(const Child& child, const std::string& what) {
  const int pid = PidOf(child);
  std::string message = pid > 0 ? absl::StrCat(child.label(), " (pid ", pid, ") ", what)
                                : absl::StrCat(child.label(), " ", what);
  const std::string tail = TailOfFile(child.log_path, options_.log_tail_lines);
  if (tail.empty()) {
    absl::StrAppend(&message, "\n  (its log ", child.log_path, " is empty)");
  } else {
    absl::StrAppend(&message, "\n--- last lines of ", child.log_path, " ---\n", tail,
                    "\n--- end of ", child.name(), ".log ---");
  }
  return absl::AbortedError(message);
}

absl::Status Launcher::CheckForFailure() {
  // A server exiting 0 is not a failure: it may exit as soon as every worker has said it
  // is done (and if it exits too early, the workers fail and are reported).
  auto failed = [this](const Child& child) {
    const ProcessState* state = StateOf(child);
    return !child.awaiting_restart && state != nullptr && !state->running &&
           !state->exited_cleanly();
  };
  if (std::none_of(children_.begin(), children_.end(), failed)) return absl::OkStatus();
  // One failure sets off others within milliseconds (its peers lose it, their peers lose
  // them): collect that cascade, then name the first (RankFailures), not whichever was
  // reaped first.
  const absl::Time settled = absl::Now() + absl::Seconds(kSimultaneousSeconds);
  for (absl::Time now = absl::Now(); now < settled; now = absl::Now()) {
    if (std::none_of(children_.begin(), children_.end(),
                     [this](const Child& child) { return Running(child); })) {
      break;
    }
    supervisor_->WaitForEvent(settled - now);
  }
  const FailureRanking ranking = RankFailures(Outcomes());
  // (Nothing is stopped yet, so RankFailures finds the failure seen above.)
  const Child& first = ranking.first >= 0
                           ? children_[ranking.first]
                           : *std::find_if(children_.begin(), children_.end(), failed);
  std::string what = DescribeWaitStatus(StateOf(first)->wait_status);
  if (options_.max_restarts > 0 && first.role == "worker" &&
      restarts_used_ >= options_.max_restarts) {
    absl::StrAppend(&what, "; no restarts left (--max_restarts=", options_.max_restarts, ", ",
                    restarts_used_, " used)");
  }
  return FailureOf(first, what);
}

absl::Status Launcher::RestartFromCheckpoints() {
  if (options_.max_restarts <= 0) return absl::OkStatus();
  const Child* dead = nullptr;
  for (const Child& child : children_) {
    const ProcessState* state = StateOf(child);
    if (child.role == "server" && state != nullptr && !state->running &&
        !state->exited_cleanly()) {
      dead = &child;
      break;
    }
  }
  if (dead == nullptr) return absl::OkStatus();
  const config::CheckpointConfig& checkpoint = config_.checkpoint();
  const std::string what = DescribeWaitStatus(StateOf(*dead)->wait_status);
  if (checkpoint.dir().empty() || checkpoint.every() <= 0) {
    return FailureOf(*dead, absl::StrCat(what,
                                         "; a server is restarted only from checkpoints, and "
                                         "this run writes none (checkpoint.dir and "
                                         "checkpoint.every), so the run cannot continue"));
  }
  if (restarts_used_ >= options_.max_restarts) return absl::OkStatus();  // a failure
  if (!options_.hosts.empty() && !options_.remote_output_dir.empty()) {
    return FailureOf(*dead, absl::StrCat(what, "; restarting servers from checkpoints needs "
                                               "their checkpoint folder visible here (a shared "
                                               "file system), not --remote_output_dir"));
  }
  ++restarts_used_;
  // A relative checkpoint.dir is relative to the processes' working folder.
  const std::string ckpt_dir = fs::path(checkpoint.dir()).is_absolute()
                                   ? checkpoint.dir()
                                   : (fs::path(options_.working_dir) / checkpoint.dir()).string();
  std::string passed_over;
  resume_iteration_ = static_cast<int64_t>(
      NewestCommonCheckpoint(ckpt_dir, config::ServerProcessCount(config_), &passed_over));
  if (!passed_over.empty()) Say(absl::StrCat("checkpoints: ", passed_over));
  Say(absl::StrCat(dead->label(), " (pid ", StateOf(*dead)->pid, ") ", what,
                   "; restarting every process from ",
                   resume_iteration_ > 0
                       ? absl::StrCat("the checkpoints of iteration ", resume_iteration_)
                       : std::string("the start (no checkpoint common to all servers yet)"),
                   " (restart ", restarts_used_, " of ", options_.max_restarts, ")"));
  std::vector<int> ids;
  std::vector<std::string> names;
  for (const Child& child : children_) {
    if (child.id >= 0 && Running(child)) {
      ids.push_back(child.id);
      names.push_back(child.name());
    }
  }
  supervisor_->Stop(ids, names, [this](const std::string& line) { Say(line); });
  for (Child& child : children_) {
    ++child.restarts;  // its log is appended to
    child.awaiting_restart = child.role == "worker";
    if (child.role != "server") continue;
    std::error_code error;
    fs::remove(child.port_file, error);
    if (options_.server_port <= 0) child.port.reset();
  }
  P3_RETURN_IF_ERROR(StartServers());
  return StartWorkers();
}

absl::Status Launcher::RestartDeadWorkers() {
  if (options_.max_restarts <= 0) return absl::OkStatus();
  auto dead_worker = [this](const Child& child) {
    const ProcessState* state = StateOf(child);
    return child.role == "worker" && state != nullptr && !state->running &&
           !state->exited_cleanly();
  };
  if (std::none_of(children_.begin(), children_.end(), dead_worker)) return absl::OkStatus();
  // A worker that lost a dead server exits within milliseconds of it (the server's own
  // exit is reaped with it or before): give such a cascade 20 ms, so that the server is
  // restarted (with everyone) instead of the worker.
  const absl::Time settled = absl::Now() + absl::Milliseconds(20);
  for (absl::Time now = absl::Now(); now < settled; now = absl::Now()) {
    supervisor_->WaitForEvent(settled - now);
  }
  for (const Child& child : children_) {
    // A server that ended takes the run with it: no restart would help.
    if (child.role == "server" && StateOf(child) != nullptr && !Running(child)) {
      return absl::OkStatus();
    }
  }
  for (Child& child : children_) {
    const ProcessState* state = StateOf(child);
    if (child.role != "worker" || state == nullptr || state->running || state->exited_cleanly()) {
      continue;
    }
    if (restarts_used_ >= options_.max_restarts) return absl::OkStatus();
    ++restarts_used_;
    ++child.restarts;
    Say(absl::StrCat(child.label(), " (pid ", state->pid, ") ",
                     DescribeWaitStatus(state->wait_status),
                     "; restarting it with --rejoin (restart ", restarts_used_, " of ",
                     options_.max_restarts, ")"));
    std::vector<std::string> args = child.args;
    args.push_back("--rejoin");
    P3_RETURN_IF_ERROR(StartProcess(child, options_.worker_binary, args));
  }
  return absl::OkStatus();
}

absl::Status Launcher::WaitForPorts() {
  const absl::Duration timeout = absl::Seconds(config_.cluster().peer_timeout_s());
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int missing = 0;
    for (Child& child : children_) {
      if (child.role != "server" || child.port.has_value()) continue;
      absl::StatusOr<std::string> text = ReadFile(child.port_file);
      if (!text.ok()) {
        ++missing;
        continue;
      }
      int port = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port) || port <= 0 ||
          port > 65535) {
        return FailureOf(child, absl::StrCat("wrote an invalid port file ", child.port_file, ": \"",
                                             absl::CEscape(*text), "\""));
      }
      child.port = port;
      Say(absl::StrCat(child.label(), " listening on ", ServerAddress(child), ":", port));
    }
    if (missing == 0) return absl::OkStatus();
    P3_RETURN_IF_ERROR(CheckForFailure());
    for (const Child& child : children_) {
      std::error_code error;
      if (child.role == "server" && !child.port.has_value() && !Running(child) &&
          !fs::exists(child.port_file, error)) {
        return FailureOf(child, "exited with status 0 without writing its port file");
      }
    }
    P3_RETURN_IF_ERROR(Interrupted());
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      for (const Child& child : children_) {
        if (child.role == "server" && !child.port.has_value()) {
          return FailureOf(child, absl::StrCat("did not write its port file ", child.port_file,
                                               " within cluster.peer_timeout_s = ",
                                               absl::FormatDuration(timeout)));
        }
      }
    }
    supervisor_->WaitForEvent(deadline - now);
  }
}

absl::Status Launcher::WaitForWorkers() {
  while (true) {
    UpdateProgress();
    P3_RETURN_IF_ERROR(RestartFromCheckpoints());
    P3_RETURN_IF_ERROR(RestartDeadWorkers());
    P3_RETURN_IF_ERROR(CheckForFailure());
    P3_RETURN_IF_ERROR(Interrupted());
    bool all_done = true;
    for (const Child& child : children_) {
      if (child.role == "worker" && Running(child)) all_done = false;
    }
    if (all_done) {
      UpdateProgress();
      display_.Finish();
      return absl::OkStatus();
    }
    // The timeout only refreshes the elapsed time of the live progress line.
    supervisor_->WaitForEvent(absl::Seconds(1));
  }
}

absl::Status Launcher::WaitForServers() {
  const absl::Duration timeout = absl::Seconds(config_.cluster().peer_timeout_s());
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    P3_RETURN_IF_ERROR(CheckForFailure());
    P3_RETURN_IF_ERROR(Interrupted());
    const Child* running = nullptr;
    for (const Child& child : children_) {
      if (Running(child)) running = &child;
    }
    if (running == nullptr) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return FailureOf(
          *running, absl::StrCat("did not exit within cluster.peer_timeout_s = ",
                                 absl::FormatDuration(timeout), " after all workers had finished"));
    }
    supervisor_->WaitForEvent(deadline - now);
  }
}

void Launcher::UpdateProgress() {
  std::vector<ProgressLine> rank0_lines;
  for (size_t rank = 0; rank < worker_logs_.size(); ++rank) {
    std::vector<ProgressLine> lines = worker_logs_[rank].ReadNewProgress();
    if (!lines.empty()) worker_iterations_[rank] = lines.back().iteration;
    if (rank == 0) rank0_lines = std::move(lines);
  }
  display_.Show(rank0_lines, absl::Now(), start_time_, worker_iterations_);
}

absl::Status Launcher::ReadResults() {
  absl::Status first_problem;
  for (Child& child : children_) {
    if (child.role != "worker" || child.result.has_value()) continue;
    absl::StatusOr<std::string> text = ReadFile(child.result_file);
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
  return WriteFileAtomically(summary_path_, SummaryText(BuildSummary(input)));
}

void Launcher::StopAll() {
  if (stop_started_ == absl::InfiniteFuture()) stop_started_ = absl::Now();
  std::vector<int> ids;
  std::vector<std::string> names;
  for (const Child& child : children_) {
    if (child.id < 0) continue;
    ids.push_back(child.id);
    names.push_back(child.name());
  }
  if (supervisor_ != nullptr) {
    supervisor_->Stop(ids, names, [this](const std::string& line) { Say(line); });
  }
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

std::string Launcher::RemotePath(const std::string& local) const {
  if (options_.hosts.empty() || options_.remote_output_dir.empty()) return local;
  absl::string_view rest = local;
  if (!absl::ConsumePrefix(&rest, output_dir_)) return local;
  return absl::StrCat(options_.remote_output_dir, rest);
}

std::string Launcher::ServerAddress(const Child& child) const {
  std::string host = config_.cluster().host();
  if (network_ != nullptr) host = network_->address(child.machine);
  if (child.host != nullptr) host = child.host->address;
  return absl::StrContains(host, ':') ? "[" + host + "]" : host;
}

absl::Status Launcher::SetUpNetwork() {
  NetworkSetupOptions setup;
  setup.network = config_.network();
  setup.run_id = RunIdForPid(getpid());
  if (!children_.empty()) {
    setup.processes_by_machine.resize(config_.network().machines());
    for (const Child& child : children_) {
      setup.processes_by_machine[child.machine].push_back(child.name());
    }
  }
  setup.say = [this](const std::string& line) { Say(line); };
  P3_ASSIGN_OR_RETURN(network_, launcher::SetUpNetwork(setup));
  for (Child& child : children_) child.ns_path = network_->namespace_path(child.machine);
  // For summary.json; SetUpNetwork has checked it already.
  absl::StatusOr<std::string> congestion_control =
      ResolveCongestionControl(config_.network(), ProcSysctlReader());
  if (congestion_control.ok()) congestion_control_ = *congestion_control;
  return absl::OkStatus();
}

absl::Status Launcher::CheckLinks(bool strict) {
  LinkCheckOptions check;
  check.configured_gbps = config_.network().bandwidth_gbps();
  check.machines = network_->machines();
  check.each = absl::Seconds(config_.network().check_seconds());
  check.strict = strict;
  check.measure = [this](int from, int to, absl::Duration each) {
    return MeasureLink(*network_, from, to, each);
  };
  check.before_each = [this] {
    supervisor_->WaitForEvent(absl::ZeroDuration());
    return Interrupted();
  };
  check.say = [this](const std::string& line) { Say(line); };
  P3_ASSIGN_OR_RETURN(link_checks_, launcher::CheckLinks(check));
  return absl::OkStatus();
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

absl::Status Launcher::FetchRemoteFiles() {
  if (options_.hosts.empty() || options_.remote_output_dir.empty()) return absl::OkStatus();
  // One ssh per host: tar the files missing here (results, records, traces) over stdout.
  for (size_t h = 0; h < options_.hosts.size(); ++h) {
    std::vector<std::string> relative;
    for (const Child& child : children_) {
      if (child.host != &options_.hosts[h]) continue;
      for (const std::string& local : {child.result_file, child.records_file, child.trace_file}) {
        std::error_code error;
        if (local.empty() || fs::exists(local, error)) continue;
        relative.push_back(fs::path(local).lexically_relative(output_dir_).string());
      }
    }
    if (relative.empty()) continue;
    const std::string archive = absl::StrCat(output_dir_, "/.fetch_host_", h, ".tar");
    const bool fetched =
        supervisor_->RunQuietly(FetchArchiveArgv(options_.ssh_command, options_.hosts[h],
                                                 options_.remote_output_dir, relative),
                                archive) &&
        supervisor_->RunQuietly({"tar", "-C", output_dir_, "-xf", archive}, "");
    std::error_code error;
    fs::remove(archive, error);
    if (!fetched) {
      // Missing results are reported by ReadResults, missing traces by MergeTraces.
      Say(absl::StrCat("warning: cannot copy the files of host ", options_.hosts[h].destination,
                       " from ", options_.remote_output_dir));
    }
  }
  return absl::OkStatus();
}

void Launcher::FetchRemoteModel() {
  if (options_.hosts.empty() || options_.remote_output_dir.empty()) return;
  for (Child& child : children_) {
    if (child.role != "worker" || child.index != 0 || child.host == nullptr || !child.result ||
        !child.result->contains("model_file") || !child.result->at("model_file").is_string()) {
      continue;
    }
    const std::string remote = child.result->at("model_file").get<std::string>();
    const fs::path local = fs::absolute(fs::path(output_dir_) / "model.pt");
    // A model_file of the user's own stays where rank 0 wrote it.
    if (!absl::EndsWith(remote, RemotePath((fs::path(output_dir_) / "model.pt").string()))) return;
    const std::string archive = absl::StrCat(output_dir_, "/.fetch_model.tar");
    const bool fetched =
        supervisor_->RunQuietly(FetchArchiveArgv(options_.ssh_command, *child.host,
                                                 options_.remote_output_dir, {"model.pt"}),
                                archive) &&
        supervisor_->RunQuietly({"tar", "-C", output_dir_, "-xf", archive}, "");
    std::error_code error;
    fs::remove(archive, error);
    if (fetched && fs::exists(local, error)) {
      (*child.result)["model_file"] = local.string();
    } else {
      Say(absl::StrCat("warning: cannot copy the model from host ", child.host->destination,
                       "; it stays there: ", remote));
    }
  }
}

absl::Status Launcher::StartServers() {
  const int servers = config::ServerProcessCount(config_);
  for (Child& child : children_) {
    if (child.role != "server") continue;
    std::vector<std::string> args = {"--config=" + RemotePath(config_out_),
                                     absl::StrCat("--server_index=", child.index),
                                     "--port_file=" + RemotePath(child.port_file)};
    if (options_.server_port > 0) {
      child.port = options_.server_port + child.index;
      args.push_back(absl::StrCat("--port=", *child.port));
    }
    if (network_ != nullptr || child.host != nullptr) {
      std::string bind = ServerAddress(child);
      if (absl::StartsWith(bind, "[")) bind = bind.substr(1, bind.size() - 2);
      args.push_back("--set=cluster.host=" + bind);
    }
    if (!child.trace_file.empty()) args.push_back("--trace_file=" + RemotePath(child.trace_file));
    if (resume_iteration_ > 0) {
      args.push_back("--set=checkpoint.resume=true");
      args.push_back(absl::StrCat("--set=checkpoint.resume_iteration=", resume_iteration_));
    }
    P3_RETURN_IF_ERROR(StartProcess(child, options_.server_binary, args));
  }
  if (servers == 0) return absl::OkStatus();
  if (options_.server_port > 0) {
    Say(absl::StrCat("started ", servers, " server(s) on fixed ports ", options_.server_port, "..",
                     options_.server_port + servers - 1));
    return absl::OkStatus();
  }
  Say(absl::StrCat("started ", servers, " server(s); waiting for their ports"));
  return WaitForPorts();
}

absl::Status Launcher::StartWorkers() {
  std::vector<std::string> addresses;
  for (const Child& child : children_) {
    if (child.role == "server") {
      addresses.push_back(absl::StrCat(ServerAddress(child), ":", *child.port));
    }
  }
  for (Child& child : children_) {
    if (child.role != "worker") continue;
    std::vector<std::string> args = {"--config=" + RemotePath(config_out_),
                                     absl::StrCat("--rank=", child.index),
                                     "--servers=" + absl::StrJoin(addresses, ","),
                                     "--result_file=" + RemotePath(child.result_file),
                                     "--records_file=" + RemotePath(child.records_file)};
    if (!child.trace_file.empty()) args.push_back("--trace_file=" + RemotePath(child.trace_file));
    child.args = args;
    P3_RETURN_IF_ERROR(StartProcess(child, options_.worker_binary, args));
    child.awaiting_restart = false;
    if (child.restarts > 0) continue;  // restarted from checkpoints: followed already
    supervisor_->WatchFile(child.log_path);
    worker_logs_.emplace_back(child.log_path);
    worker_iterations_.push_back(0);
  }
  const int servers = config::ServerProcessCount(config_);
  Say(absl::StrCat("started ", config::WorkerProcessCount(config_),
                   " worker(s); rank 0's log: ", children_[servers].log_path));
  return absl::OkStatus();
}

int Launcher::Run() {
  start_time_ = absl::Now();
  ProcessSupervisor::Options supervision;
  supervision.kill_grace = options_.kill_grace;
  absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor =
      ProcessSupervisor::Create(supervision);
  if (!supervisor.ok()) {
    std::cerr << "launch_cluster: " << supervisor.status().message() << "\n";
    return 1;
  }
  supervisor_ = *std::move(supervisor);

  absl::Status status = PrepareOutputDir(/*clear_stale=*/true, /*write_config=*/true);
  if (!status.ok()) {
    std::cerr << "launch_cluster: " << status.message() << "\n";
    return 2;
  }
  supervisor_->WatchFolder((fs::path(output_dir_) / "ports").string());
  const int servers = config::ServerProcessCount(config_);
  const int workers = config::WorkerProcessCount(config_);
  Say(absl::StrCat("experiment \"", config_.name(), "\": mode ", config_.mode(), ", model ",
                   config_.model().name(), ", ", servers, " server(s), ", workers,
                   " worker(s), batch ", config_.training().batch_size(), " per worker (",
                   config::GlobalBatchSize(config_), " in all)"));
  Say(absl::StrCat("output: ", output_dir_));
  for (size_t h = 0; h < options_.hosts.size(); ++h) {
    std::vector<std::string> names;
    for (const Child& child : children_) {
      if (child.machine == static_cast<int>(h)) names.push_back(child.name());
    }
    Say(absl::StrCat("  host ", h, " ", options_.hosts[h].destination, " (",
                     options_.hosts[h].address,
                     "): ", names.empty() ? "(idle)" : absl::StrJoin(names, ", ")));
  }
  if (config::NetworkEmulated(config_) && options_.hosts.empty()) {
    status = SetUpNetwork();
    if (status.ok() && config_.network().check_links()) status = CheckLinks(/*strict=*/false);
  } else if (config_.network().bandwidth_gbps() > 0 && servers == 0) {
    Say("mode local runs one process: no network to emulate");
  }

  // Servers first: the workers need their ports.
  if (status.ok()) status = StartServers();
  if (status.ok()) status = StartWorkers();
  if (status.ok()) status = WaitForWorkers();
  if (status.ok() && servers > 0) status = WaitForServers();
  if (status.ok()) status = FetchRemoteFiles();
  if (status.ok()) status = ReadResults();
  if (status.ok()) FetchRemoteModel();
  if (status.ok()) MergeTraces();
  if (status.ok()) status = WriteSummary();

  const launcher::Say say = [this](const std::string& line) { Say(line); };
  if (!status.ok()) {
    display_.Clear();
    std::cout << std::flush;
    if (absl::IsCancelled(status)) {
      std::cerr << "[p3] " << status.message() << "\n";
    } else {
      std::cerr << "[p3] FAILED: " << status.message() << "\n";
    }
    StopAll();
    if (!absl::IsCancelled(status)) ReportFailure(status);
    PrintTable();
    TearDownNetwork(network_, say);
    std::cerr << "[p3] run failed; logs are in " << output_dir_ << "/logs" << std::endl;
    return absl::IsCancelled(status) ? 128 + supervisor_->interrupt_signal() : 1;
  }

  std::cout << "\n";
  PrintTable();
  if (const std::string straggler = StragglerLine(Timings()); !straggler.empty()) Say(straggler);
  TearDownNetwork(network_, say);
  const nlohmann::ordered_json& rank0 = *children_[servers].result;
  Say(absl::StrCat("done in ",
                   absl::StrFormat("%.1f s", absl::ToDoubleSeconds(absl::Now() - start_time_)),
                   ": ", NumberText(rank0.at("iterations")), " iterations, ",
                   NumberText(rank0.at("samples_per_second")), " samples/s, final loss ",
                   NumberText(rank0.at("final_loss")), ", test accuracy ",
                   NumberText(rank0.at("test_accuracy"))));
  if (rank0.contains("online_search")) {
    const nlohmann::ordered_json& search = rank0["online_search"];
    std::vector<std::string> timed;
    for (const nlohmann::ordered_json& c : search["timed"]) {
      timed.push_back(absl::StrFormat("%d: %.3f s", c["slice_params"].get<int64_t>(),
                                      c["mean_seconds"].get<double>()));
    }
    Say(absl::StrCat("online search: slice_params ", NumberText(search["chosen_slice_params"]),
                     " from iteration ", NumberText(search["done_iteration"]), " (mean ",
                     "iteration time ", absl::StrJoin(timed, ", "), "; ",
                     search["reason"].get<std::string>(), ")"));
  }
  if (restarts_used_ > 0) {
    std::vector<std::string> restarted;
    for (const Child& child : children_) {
      if (child.restarts > 0)
        restarted.push_back(absl::StrCat(child.label(), " ×", child.restarts));
    }
    Say(absl::StrCat("restarted ", absl::StrJoin(restarted, ", "),
                     " (--max_restarts=", options_.max_restarts, ")"));
  }
  if (!trace_path_.empty()) Say(absl::StrCat("trace: ", trace_path_));
  Say(absl::StrCat("summary: ", summary_path_));
  DrawCurves();
  return 0;
}

int Launcher::CheckNetworkOnly() {
  start_time_ = absl::Now();
  absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor =
      ProcessSupervisor::Create(ProcessSupervisor::Options{});
  if (!supervisor.ok()) {
    std::cerr << "launch_cluster: " << supervisor.status().message() << "\n";
    return 1;
  }
  supervisor_ = *std::move(supervisor);
  absl::Status status = SetUpNetwork();
  if (status.ok()) status = CheckLinks(/*strict=*/true);
  TearDownNetwork(network_, [this](const std::string& line) { Say(line); });
  if (!status.ok()) {
    std::cerr << "[p3] " << (absl::IsCancelled(status) ? "" : "FAILED: ") << status.message()
              << std::endl;
    return absl::IsCancelled(status) ? 128 + supervisor_->interrupt_signal() : 1;
  }
  Say("no link exceeds its configured rate");
  return 0;
}

int Launcher::Collect() {
  start_time_ = absl::Now();
  absl::Status status = PrepareOutputDir(/*clear_stale=*/false, /*write_config=*/false);
  if (!status.ok()) {
    std::cerr << "[p3] FAILED: " << status.message() << std::endl;
    return 1;
  }
  ReadExitRecords();
  // The run's start: the earliest recorded one (the failures' times are relative to it).
  for (const Child& child : children_) {
    if (!child.recorded.has_value()) continue;
    const absl::Time started = absl::UnixEpoch() + absl::Seconds(child.recorded->start_unix);
    if (started < start_time_) start_time_ = started;
  }
  status = ReadResults();
  const std::vector<ProcessOutcome> outcomes = Outcomes();
  if (const int first = RankFailures(outcomes).first; first >= 0) {
    const ProcessOutcome& failed = outcomes[first];
    status = absl::AbortedError(
        absl::StrCat(failed.name, failed.node.empty() ? "" : " on " + failed.node, " ended with ",
                     failed.status(), " (its exit record results/", failed.name, ".exit.json)"));
  }
  if (!status.ok()) {
    std::cerr << "[p3] FAILED: " << status.message() << std::endl;
    ReportFailure(status);
    PrintTable();
    return 1;
  }
  MergeTraces();
  status = WriteSummary();
  if (!status.ok()) {
    std::cerr << "[p3] FAILED: " << status.message() << std::endl;
    return 1;
  }
  PrintTable();
  if (const std::string straggler = StragglerLine(Timings()); !straggler.empty()) Say(straggler);
  Say(absl::StrCat("summary: ", summary_path_));
  DrawCurves();
  return 0;
}

}  // namespace p3::tools::launcher
