// The Launcher's restarts under --max_restarts: a dead worker starts again with
// --rejoin; a dead server restarts every process from the newest checkpoint all servers
// have, or the run fails saying why it cannot.
#include "tools/launcher/launcher.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/base/status_macros.h"
#include "p3/core/checkpoint.h"
#include "p3/core/membership.h"
#include "proto/config.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

}  // namespace

absl::Status Launcher::RestartFromCheckpoints() {
  if (options_.max_restarts <= 0) return absl::OkStatus();
  // An elastic run has no rejoins: a dead worker, too, restarts every process.
  const bool elastic = config_.cluster().has_elastic();
  const Child* dead = nullptr;
  for (const Child& child : children_) {
    const ProcessState* state = StateOf(child);
    if ((child.role == "server" || (elastic && !child.gone && !child.awaiting_restart)) &&
        state != nullptr && !state->running && !state->exited_cleanly()) {
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
  std::vector<int> present;
  if (elastic) {
    P3_ASSIGN_OR_RETURN(present, ElasticPresentAt(ckpt_dir, resume_iteration_));
  }
  Say(absl::StrCat(dead->label(), " (pid ", StateOf(*dead)->pid, ") ", what,
                   "; restarting every process from ",
                   resume_iteration_ > 0
                       ? absl::StrCat("the checkpoints of iteration ", resume_iteration_)
                       : std::string("the start (no checkpoint common to all servers yet)"),
                   " (restart ", restarts_used_, " of ", options_.max_restarts, ")",
                   elastic ? absl::StrCat("; the ranks present then: ", DescribeRanks(present))
                           : std::string()));
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
    child.awaiting_restart = child.role == "worker";
    if (elastic && child.role == "worker") {
      child.gone = std::find(present.begin(), present.end(), child.index) == present.end();
      child.awaiting_restart = !child.gone;
    }
    if (!child.gone) ++child.restarts;  // its log is appended to
    if (child.role != "server") continue;
    std::error_code error;
    fs::remove(child.port_file, error);
    if (options_.server_port <= 0) child.port.reset();
  }
  P3_RETURN_IF_ERROR(StartServers());
  return StartWorkers();
}

absl::Status Launcher::RestartDeadWorkers() {
  // Elastic runs restart from checkpoints instead (RestartFromCheckpoints).
  if (options_.max_restarts <= 0 || config_.cluster().has_elastic()) return absl::OkStatus();
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
                     config_.worker().has_command() ? "; restarting it with P3_REJOIN=1"
                                                    : "; restarting it with --rejoin",
                     " (restart ", restarts_used_, " of ", options_.max_restarts, ")"));
    P3_RETURN_IF_ERROR(StartProcess(child, WorkerArgv(child, /*rejoin=*/true)));
  }
  return absl::OkStatus();
}

}  // namespace p3::tools::launcher
