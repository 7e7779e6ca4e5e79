// The Launcher's processes: starting the servers and workers (over ssh with --hosts),
// waiting for the servers' ports and for everyone to finish while showing progress,
// telling a failure (the first of a cascade) and stopping them all.
#include "tools/launcher/launcher.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"
#include "proto/config.h"
#include "tools/launcher/summary.h"
#include "tools/launcher/worker_program.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

}  // namespace

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

absl::Status Launcher::StartProcess(Child& child, std::vector<std::string> argv) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
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
    remote.environment = options_.environment;
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
    return !child.awaiting_restart && !child.gone && state != nullptr && !state->running &&
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
    P3_RETURN_IF_ERROR(PollElasticControl());
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

std::string Launcher::ServerAddress(const Child& child) const {
  std::string host = config_.cluster().host();
  if (network_ != nullptr) host = network_->address(child.machine);
  if (child.host != nullptr) host = child.host->address;
  return absl::StrContains(host, ':') ? "[" + host + "]" : host;
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
    args.insert(args.begin(), options_.server_binary);
    P3_RETURN_IF_ERROR(StartProcess(child, std::move(args)));
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

std::vector<std::string> Launcher::WorkerArgv(const Child& child, bool rejoin) const {
  const std::string servers = absl::StrJoin(server_addresses_, ",");
  const std::string trace_file = child.trace_file.empty() ? "" : RemotePath(child.trace_file);
  if (config_.worker().has_command()) {
    WorkerProgramEnv env;
    env.rank = child.index;
    env.world_size = config::WorkerProcessCount(config_);
    env.servers = servers;
    env.config_path = RemotePath(config_out_);
    env.result_file = RemotePath(child.result_file);
    env.records_file = RemotePath(child.records_file);
    env.trace_file = trace_file;
    env.rejoin = rejoin;
    env.run_dir = RemotePath(output_dir_);
    // Locally the command runs in the launcher's working folder (where `bazel run` was
    // invoked); over ssh the remote script changes into it already.
    return WorkerProgramArgv(config_.worker().command(), env,
                             child.host == nullptr ? options_.working_dir : "");
  }
  std::vector<std::string> argv = {options_.worker_binary,
                                   "--config=" + RemotePath(config_out_),
                                   absl::StrCat("--rank=", child.index),
                                   "--servers=" + servers,
                                   "--result_file=" + RemotePath(child.result_file),
                                   "--records_file=" + RemotePath(child.records_file)};
  if (!trace_file.empty()) argv.push_back("--trace_file=" + trace_file);
  if (rejoin) argv.push_back("--rejoin");
  // Elastic runs: rank 0 reads membership requests (`leave R`) appended to this file
  // between iterations (docs/reliability.md, "Elastic membership"). Mode local replays a
  // membership and reads none.
  if (config_.cluster().has_elastic() && config_.mode() != "local") {
    argv.push_back("--membership_requests=" + RemotePath(output_dir_ + "/membership_requests"));
  }
  return argv;
}

absl::Status Launcher::StartWorkers() {
  server_addresses_.clear();
  // Elastic runs: a fresh requests file; control lines written before now are ignored.
  if (config_.cluster().has_elastic() && config_.mode() != "local") {
    std::ofstream(output_dir_ + "/membership_requests", std::ios::trunc);
    std::error_code error;
    const auto size = std::filesystem::file_size(options_.elastic_control, error);
    elastic_control_offset_ = error ? 0 : static_cast<int64_t>(size);
  }
  for (const Child& child : children_) {
    if (child.role == "server") {
      server_addresses_.push_back(absl::StrCat(ServerAddress(child), ":", *child.port));
    }
  }
  for (Child& child : children_) {
    if (child.role != "worker" || child.gone) continue;
    P3_RETURN_IF_ERROR(StartProcess(child, WorkerArgv(child, /*rejoin=*/false)));
    child.awaiting_restart = false;
    if (child.restarts > 0) continue;  // restarted from checkpoints: followed already
    supervisor_->WatchFile(child.log_path);
    worker_logs_.emplace_back(child.log_path);
    worker_iterations_.push_back(0);
  }
  const int servers = config::ServerProcessCount(config_);
  Say(absl::StrCat("started ", config::WorkerProcessCount(config_), " worker(s)",
                   config_.worker().has_command()
                       ? absl::StrCat(" running worker.command \"", config_.worker().command(), "\"")
                       : "",
                   "; rank 0's log: ", children_[servers].log_path));
  return absl::OkStatus();
}

}  // namespace p3::tools::launcher
