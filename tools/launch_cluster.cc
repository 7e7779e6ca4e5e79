// launch_cluster: runs one experiment on a local P3 cluster.
//
// Loads and validates an experiment config (tools/config.h), writes the resolved config
// to <output_dir>/config.textproto, starts cluster.servers server processes, waits for
// each to publish its port, starts cluster.workers worker processes, shows rank 0's
// progress, and writes <output_dir>/summary.json when every process has exited cleanly.
// If any process fails, or the launcher gets SIGINT / SIGTERM / SIGHUP, it stops all the
// others (SIGTERM, then SIGKILL after --kill_grace_s) and exits non-zero. Children also
// get SIGKILL from the kernel if the launcher itself dies (PR_SET_PDEATHSIG), so no
// process is left behind.
//
// Example:
//   bazel run //tools:launch_cluster -- --config=configs/local.textproto
//       --set=training.iterations=100 --set=output_dir=out/quick   (one command line)
//
// The process contract (arguments, port files, result files) and the output layout are
// documented in docs/launcher.md. Exit status: 0 success, 1 a process failed or a
// result was malformed, 2 bad command line or config (nothing was started),
// 128+signal when interrupted.
//
// The launcher is single-threaded: one poll() loop waits on a signalfd (SIGCHLD and the
// termination signals) and an inotify descriptor (port files appearing, rank 0's log
// growing), so it can fork() safely and never sleeps to wait for a condition.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/config.pb.h"
#include "tools/config.h"

ABSL_FLAG(std::string, config, "configs/default.textproto",
          "Experiment config (text format). A relative path is looked up first in "
          "$BUILD_WORKING_DIRECTORY (where `bazel run` was invoked), then in the current "
          "directory (the runfiles tree under `bazel run`).");
ABSL_FLAG(std::string, server_binary, "server/p3_server",
          "Server executable; relative paths resolve like --config.");
ABSL_FLAG(std::string, worker_binary, "worker/p3_worker",
          "Worker executable; relative paths resolve like --config.");
ABSL_FLAG(double, kill_grace_s, 5, "Seconds between SIGTERM and SIGKILL when stopping processes.");
ABSL_FLAG(int, log_tail_lines, 20, "Lines of a failed process's log to print.");

namespace p3::tools {
namespace {

namespace fs = std::filesystem;
using config::ExperimentConfig;

constexpr char kUsage[] =
    "Runs one experiment on a local P3 cluster.\n"
    "\n"
    "  bazel run //tools:launch_cluster -- [--config=PATH] [--set=field.path=value ...]\n"
    "\n"
    "--set overrides one config field and may be repeated; later ones win, e.g.\n"
    "  --set=training.batch_size=64 --set=mode=baseline --set=optimizer.lr=0.01\n"
    "See docs/launcher.md and docs/config.md.";

// Everything main() resolves from flags and the environment.
struct LauncherOptions {
  // Absolute paths.
  std::string config_path;
  std::string server_binary;
  std::string worker_binary;
  // Folder that a relative config.output_dir is relative to.
  std::string working_dir;
  // Overrides from --set, in order.
  std::vector<std::string> overrides;
  // Default: 5 seconds.
  absl::Duration kill_grace = absl::Seconds(5);
  // Default: 20.
  int log_tail_lines = 20;
  // Redraw one progress line in place (stdout is a terminal) instead of printing lines.
  bool live_progress = false;
};

// One server or worker process.
struct Child {
  std::string role;  // "server" or "worker".
  int index = 0;     // Server index or worker rank.
  std::string log_path;
  std::string port_file;     // Servers.
  std::string result_file;   // Workers.
  std::string records_file;  // Workers.
  pid_t pid = -1;
  bool running = false;
  int wait_status = 0;
  absl::Time start_time;
  absl::Time end_time;
  std::optional<int> port;          // Servers, once published.
  google::protobuf::Struct result;  // Workers, once read.
  std::string result_text;          // Workers: the result file as written.

  std::string name() const { return absl::StrCat(role, "_", index); }
  std::string label() const { return absl::StrCat(role, " ", index); }
  bool exited_cleanly() const {
    return !running && pid > 0 && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  }
};

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrCat("was killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// Writes `contents` to `path` atomically (temporary file + rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    file << contents;
    file.flush();
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The last `lines` lines of the file at `path` (at most its last 64 KiB).
std::string TailOfFile(const std::string& path, int lines) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return "";
  const std::streamoff size = file.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 64 * 1024);
  file.seekg(start);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> all = absl::StrSplit(text, '\n');
  if (!all.empty() && all.back().empty()) all.pop_back();
  if (static_cast<int>(all.size()) > lines) all.erase(all.begin(), all.end() - lines);
  return absl::StrJoin(all, "\n");
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string JsonValue(const google::protobuf::Value& value) {
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(value, &out).ok()) return "null";
  return out;
}

// A PROGRESS line of a worker: `PROGRESS iteration=<i> total=<n> loss=<float>
// samples_per_second=<float>`.
struct Progress {
  int64_t iteration = 0;
  int64_t total = 0;
  double loss = 0;
  double samples_per_second = 0;
};

std::optional<Progress> ParseProgressLine(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, "PROGRESS ")) return std::nullopt;
  Progress progress;
  int found = 0;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, '=');
    bool ok = false;
    if (kv.first == "iteration") ok = absl::SimpleAtoi(kv.second, &progress.iteration);
    if (kv.first == "total") ok = absl::SimpleAtoi(kv.second, &progress.total);
    if (kv.first == "loss") ok = absl::SimpleAtod(kv.second, &progress.loss);
    if (kv.first == "samples_per_second") {
      ok = absl::SimpleAtod(kv.second, &progress.samples_per_second);
    }
    if (ok) ++found;
  }
  if (found < 4) return std::nullopt;
  return progress;
}

class Launcher {
 public:
  Launcher(LauncherOptions options, ExperimentConfig config)
      : options_(std::move(options)), config_(std::move(config)) {}

  // Stops any child still running, so that no exit path leaves one behind.
  ~Launcher() {
    for (Child& child : children_) {
      if (!child.running) continue;
      kill(-child.pid, SIGKILL);
      kill(child.pid, SIGKILL);
      waitpid(child.pid, &child.wait_status, 0);
      child.running = false;
    }
    if (signal_fd_ >= 0) close(signal_fd_);
    if (inotify_fd_ >= 0) close(inotify_fd_);
  }

  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Runs the experiment; returns the process exit status.
  int Run(const sigset_t& original_mask, int signal_fd);

 private:
  absl::Status PrepareOutputDir();
  absl::Status StartProcess(Child& child, const std::string& binary,
                            const std::vector<std::string>& args);
  absl::Status WaitForPorts();
  absl::Status WaitForWorkers();
  absl::Status WaitForServers();
  absl::Status ReadResults();
  absl::Status WriteSummary();
  // Waits up to `timeout` for a signal, a child's exit or a watched file change, then
  // reaps exited children.
  void WaitForEvent(absl::Duration timeout);
  void Reap();
  // The first process that exited non-zero or was killed, as an error with the tail of
  // its log; else OK. A server exiting 0 is not a failure: it may exit as soon as every
  // worker has said it is done, before the workers exit (and if it exits too early, the
  // workers fail and are reported).
  absl::Status CheckForFailure();
  absl::Status FailureOf(const Child& child, const std::string& what);
  absl::Status InterruptedError() const;
  void StopAll();
  void UpdateProgress();
  // Ends the live progress line with a newline, leaving it on the terminal.
  void FinishProgressLine();
  void Say(const std::string& line);
  void ClearProgressLine();
  void PrintTable();

  const LauncherOptions options_;
  const ExperimentConfig config_;
  std::vector<Child> children_;  // Servers first, then workers by rank.
  sigset_t original_mask_;
  int signal_fd_ = -1;
  int inotify_fd_ = -1;
  int interrupt_signal_ = 0;
  int interrupt_count_ = 0;
  absl::Time start_time_;

  std::string output_dir_;
  std::string config_out_;
  std::string summary_path_;

  // Tail of rank 0's log.
  int64_t log_offset_ = 0;
  std::string log_partial_line_;
  std::optional<Progress> progress_;
  bool progress_line_shown_ = false;
  absl::Time last_progress_draw_ = absl::InfinitePast();
};

void Launcher::Say(const std::string& line) {
  ClearProgressLine();
  std::cout << "[p3] " << line << std::endl;
}

void Launcher::ClearProgressLine() {
  if (progress_line_shown_) {
    std::cout << "\r\033[K" << std::flush;
    progress_line_shown_ = false;
  }
}

absl::Status Launcher::PrepareOutputDir() {
  fs::path out(config_.output_dir());
  if (out.is_relative()) out = fs::path(options_.working_dir) / out;
  out = out.lexically_normal();
  output_dir_ = out.string();
  std::error_code error;
  for (const char* sub : {"", "logs", "ports", "results", "records"}) {
    fs::create_directories(out / sub, error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("output_dir: cannot create ", (out / sub).string(), ": ", error.message()));
    }
  }
  config_out_ = (out / "config.textproto").string();
  summary_path_ = (out / "summary.json").string();
  // Files of an earlier run in the same folder must not be mistaken for this run's.
  fs::remove(summary_path_, error);
  for (int i = 0; i < config::ServerProcessCount(config_); ++i) {
    Child server;
    server.role = "server";
    server.index = i;
    server.log_path = (out / "logs" / (server.name() + ".log")).string();
    server.port_file = (out / "ports" / (server.name() + ".port")).string();
    fs::remove(server.port_file, error);
    children_.push_back(server);
  }
  for (int r = 0; r < config::WorkerProcessCount(config_); ++r) {
    Child worker;
    worker.role = "worker";
    worker.index = r;
    worker.log_path = (out / "logs" / (worker.name() + ".log")).string();
    worker.result_file = (out / "results" / (worker.name() + ".json")).string();
    worker.records_file = (out / "records" / (worker.name() + ".csv")).string();
    fs::remove(worker.result_file, error);
    fs::remove(worker.records_file, error);
    children_.push_back(worker);
  }

  std::string text = absl::StrCat(
      "# Resolved experiment config written by launch_cluster: defaults filled, overrides\n"
      "# applied. Source: ",
      options_.config_path, "\n");
  for (const std::string& override_text : options_.overrides) {
    absl::StrAppend(&text, "# --set=", override_text, "\n");
  }
  absl::StrAppend(&text, config::ConfigToText(config_));
  return WriteFileAtomically(config_out_, text);
}

absl::Status Launcher::StartProcess(Child& child, const std::string& binary,
                                    const std::vector<std::string>& args) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> argv_ptrs;
  for (std::string& arg : argv) argv_ptrs.push_back(arg.data());
  argv_ptrs.push_back(nullptr);

  const int log_fd = open(child.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", child.log_path, ": ", std::strerror(errno)));
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start ", child.label(), ": fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    setpgid(0, 0);  // Own process group: stopped as a group, deaf to the terminal's ^C.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // The launcher died before prctl.
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(argv_ptrs[0], argv_ptrs.data());
    const char message[] = "launch_cluster: exec failed: ";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    (void)!write(STDERR_FILENO, argv_ptrs[0], strlen(argv_ptrs[0]));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  setpgid(pid, pid);  // Also here, so that kill(-pid) works before the child runs.
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  child.pid = pid;
  child.running = true;
  child.start_time = absl::Now();
  return absl::OkStatus();
}

void Launcher::Reap() {
  for (Child& child : children_) {
    if (!child.running) continue;
    int status = 0;
    if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
      child.running = false;
      child.wait_status = status;
      child.end_time = absl::Now();
    }
  }
}

void Launcher::WaitForEvent(absl::Duration timeout) {
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const int timeout_ms =
      static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 0, 1000 * 1000));
  const int ready = poll(fds, inotify_fd_ >= 0 ? 2 : 1, timeout_ms);
  if (ready > 0 && (fds[0].revents & POLLIN)) {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      if (info.ssi_signo == SIGCHLD) continue;
      ++interrupt_count_;
      if (interrupt_signal_ == 0) interrupt_signal_ = static_cast<int>(info.ssi_signo);
    }
  }
  if (ready > 0 && inotify_fd_ >= 0 && (fds[1].revents & POLLIN)) {
    char buffer[4096];
    while (read(inotify_fd_, buffer, sizeof(buffer)) > 0) {
    }
  }
  Reap();
}

absl::Status Launcher::InterruptedError() const {
  return absl::CancelledError(
      absl::StrCat("interrupted by ", sigabbrev_np(interrupt_signal_) != nullptr
                                          ? absl::StrCat("SIG", sigabbrev_np(interrupt_signal_))
                                          : absl::StrCat("signal ", interrupt_signal_)));
}

absl::Status Launcher::FailureOf(const Child& child, const std::string& what) {
  std::string message = absl::StrCat(child.label(), " (pid ", child.pid, ") ", what);
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
  // Report the process that ended first: the others often fail because of it.
  const Child* first = nullptr;
  for (const Child& child : children_) {
    if (child.running || child.pid <= 0 || child.exited_cleanly()) continue;
    if (first == nullptr || child.end_time < first->end_time) first = &child;
  }
  if (first == nullptr) return absl::OkStatus();
  return FailureOf(*first, DescribeWaitStatus(first->wait_status));
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
      Say(absl::StrCat(child.label(), " listening on ", config_.cluster().host(), ":", port));
    }
    if (missing == 0) return absl::OkStatus();
    absl::Status failure = CheckForFailure();
    if (!failure.ok()) return failure;
    for (const Child& child : children_) {
      if (child.role == "server" && !child.port.has_value() && !child.running &&
          !fs::exists(child.port_file)) {
        return FailureOf(child, "exited with status 0 without writing its port file");
      }
    }
    if (interrupt_signal_ != 0) return InterruptedError();
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
    WaitForEvent(deadline - now);
  }
}

absl::Status Launcher::WaitForWorkers() {
  while (true) {
    UpdateProgress();
    absl::Status failure = CheckForFailure();
    if (!failure.ok()) return failure;
    if (interrupt_signal_ != 0) return InterruptedError();
    bool all_done = true;
    for (const Child& child : children_) {
      if (child.role == "worker" && child.running) all_done = false;
    }
    if (all_done) {
      UpdateProgress();
      FinishProgressLine();
      return absl::OkStatus();
    }
    // The timeout only refreshes the elapsed time of the live progress line.
    WaitForEvent(absl::Seconds(1));
  }
}

absl::Status Launcher::WaitForServers() {
  const absl::Duration timeout = absl::Seconds(config_.cluster().peer_timeout_s());
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::Status failure = CheckForFailure();
    if (!failure.ok()) return failure;
    if (interrupt_signal_ != 0) return InterruptedError();
    const Child* running = nullptr;
    for (const Child& child : children_) {
      if (child.running) running = &child;
    }
    if (running == nullptr) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return FailureOf(
          *running, absl::StrCat("did not exit within cluster.peer_timeout_s = ",
                                 absl::FormatDuration(timeout), " after all workers had finished"));
    }
    WaitForEvent(deadline - now);
  }
}

void Launcher::UpdateProgress() {
  const Child* rank0 = nullptr;
  for (const Child& child : children_) {
    if (child.role == "worker" && child.index == 0) rank0 = &child;
  }
  std::vector<Progress> new_progress;
  if (rank0 != nullptr) {
    std::ifstream log(rank0->log_path, std::ios::binary);
    if (log) {
      log.seekg(log_offset_);
      std::string chunk((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      log_offset_ += static_cast<int64_t>(chunk.size());
      log_partial_line_ += chunk;
      size_t newline;
      while ((newline = log_partial_line_.find('\n')) != std::string::npos) {
        std::optional<Progress> progress =
            ParseProgressLine(absl::string_view(log_partial_line_).substr(0, newline));
        if (progress.has_value()) new_progress.push_back(*progress);
        log_partial_line_.erase(0, newline + 1);
      }
    }
  }
  const absl::Time now = absl::Now();
  auto format = [this, now](const Progress& progress) {
    return absl::StrFormat("[p3] iter %d/%d  loss %.4g  %.0f samples/s  elapsed %ds",
                           progress.iteration, progress.total, progress.loss,
                           progress.samples_per_second, absl::ToInt64Seconds(now - start_time_));
  };
  if (!options_.live_progress) {
    // Plain lines for logs and pipes: one per PROGRESS line of rank 0.
    for (const Progress& progress : new_progress) std::cout << format(progress) << "\n";
    if (!new_progress.empty()) std::cout << std::flush;
    return;
  }
  if (!new_progress.empty()) progress_ = new_progress.back();
  if (new_progress.empty() && now - last_progress_draw_ < absl::Seconds(1)) return;
  const std::string line =
      progress_.has_value()
          ? format(*progress_)
          : absl::StrFormat("[p3] waiting for rank 0's first progress line  elapsed %ds",
                            absl::ToInt64Seconds(now - start_time_));
  std::cout << "\r\033[K" << line << std::flush;
  progress_line_shown_ = true;
  last_progress_draw_ = now;
}

void Launcher::FinishProgressLine() {
  if (progress_line_shown_) {
    std::cout << "\n" << std::flush;
    progress_line_shown_ = false;
  }
}

absl::Status Launcher::ReadResults() {
  for (Child& child : children_) {
    if (child.role != "worker") continue;
    absl::StatusOr<std::string> text = ReadFile(child.result_file);
    if (!text.ok()) {
      return FailureOf(
          child, absl::StrCat("exited with status 0 but wrote no result file ", child.result_file));
    }
    child.result_text = std::string(absl::StripAsciiWhitespace(*text));
    google::protobuf::util::Status parsed =
        google::protobuf::util::JsonStringToMessage(child.result_text, &child.result);
    if (!parsed.ok()) {
      return FailureOf(child, absl::StrCat("wrote a result file that is not a JSON object: ",
                                           child.result_file, ": ", parsed.ToString()));
    }
    for (const char* key : {"rank", "iterations", "samples_per_second", "final_loss",
                            "test_accuracy", "param_l2", "wall_seconds"}) {
      if (child.result.fields().count(key) == 0) {
        return FailureOf(
            child, absl::StrCat("wrote a result file without \"", key, "\": ", child.result_file));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Launcher::WriteSummary() {
  const Child* rank0 = nullptr;
  std::vector<std::string> results;
  for (const Child& child : children_) {
    if (child.role != "worker") continue;
    if (child.index == 0) rank0 = &child;
    results.push_back(child.result_text);
  }
  auto rank0_value = [&](const char* key) { return JsonValue(rank0->result.fields().at(key)); };
  std::string json = "{\n";
  auto add = [&json](const std::string& key, const std::string& value) {
    absl::StrAppend(&json, "  ", JsonString(key), ": ", value, ",\n");
  };
  add("name", JsonString(config_.name()));
  add("mode", JsonString(config_.mode()));
  add("model", JsonString(config_.model().name()));
  add("workers", absl::StrCat(config_.cluster().workers()));
  add("servers", absl::StrCat(config_.cluster().servers()));
  add("worker_processes", absl::StrCat(config::WorkerProcessCount(config_)));
  add("server_processes", absl::StrCat(config::ServerProcessCount(config_)));
  add("batch_size_per_worker", absl::StrCat(config_.training().batch_size()));
  add("global_batch_size", absl::StrCat(config::GlobalBatchSize(config_)));
  for (const char* key : {"iterations", "samples_per_second", "final_loss", "test_accuracy",
                          "param_l2", "wall_seconds"}) {
    add(key, rank0_value(key));
  }
  add("launcher_wall_seconds",
      absl::StrFormat("%.3f", absl::ToDoubleSeconds(absl::Now() - start_time_)));
  add("config", JsonString(config_out_));
  add("output_dir", JsonString(output_dir_));
  absl::StrAppend(&json, "  \"workers_results\": [\n    ", absl::StrJoin(results, ",\n    "),
                  "\n  ]\n}\n");
  return WriteFileAtomically(summary_path_, json);
}

void Launcher::StopAll() {
  std::vector<Child*> running;
  for (Child& child : children_) {
    if (child.running) running.push_back(&child);
  }
  if (running.empty()) return;
  std::vector<std::string> names;
  for (Child* child : running) names.push_back(child->name());
  Say(absl::StrCat("stopping ", absl::StrJoin(names, ", "), " (SIGTERM)"));
  for (Child* child : running) kill(-child->pid, SIGTERM);

  const int interrupts_before = interrupt_count_;
  const absl::Time deadline = absl::Now() + options_.kill_grace;
  while (true) {
    bool any = false;
    for (Child* child : running) any = any || child->running;
    if (!any) return;
    const absl::Time now = absl::Now();
    // A second ^C means "now": skip the grace period.
    if (now >= deadline || interrupt_count_ > interrupts_before) break;
    WaitForEvent(deadline - now);
  }
  for (Child* child : running) {
    if (!child->running) continue;
    Say(absl::StrCat(child->name(), " did not stop; sending SIGKILL"));
    kill(-child->pid, SIGKILL);
  }
  for (Child* child : running) {
    if (!child->running) continue;
    int status = 0;
    if (waitpid(child->pid, &status, 0) == child->pid) {
      child->running = false;
      child->wait_status = status;
      child->end_time = absl::Now();
    }
  }
}

void Launcher::PrintTable() {
  auto field = [](const Child& child, const char* key) -> std::string {
    auto it = child.result.fields().find(key);
    if (it == child.result.fields().end()) return "-";
    const google::protobuf::Value& value = it->second;
    if (value.kind_case() != google::protobuf::Value::kNumberValue) return "-";
    const double number = value.number_value();
    if (number == std::floor(number) && std::fabs(number) < 1e15) {
      return absl::StrCat(static_cast<int64_t>(number));
    }
    return absl::StrFormat("%.4g", number);
  };
  std::cout << absl::StrFormat("%-10s %8s  %-26s %8s %10s %11s %10s %9s\n", "process", "pid",
                               "status", "seconds", "iterations", "samples/s", "final_loss",
                               "test_acc");
  for (const Child& child : children_) {
    std::string status = "not started";
    double seconds = 0;
    if (child.pid > 0) {
      status = child.running ? "running" : DescribeWaitStatus(child.wait_status);
      absl::StrReplaceAll({{"exited with status", "exit"}, {"was killed by signal", "signal"}},
                          &status);
      const absl::Time end = child.running ? absl::Now() : child.end_time;
      seconds = absl::ToDoubleSeconds(end - child.start_time);
    }
    const bool worker = child.role == "worker";
    const std::string row = absl::StrFormat(
        "%-10s %8s  %-26s %8.1f %10s %11s %10s %9s", child.name(),
        child.pid > 0 ? absl::StrCat(child.pid) : "-", status, seconds,
        worker ? field(child, "iterations") : "", worker ? field(child, "samples_per_second") : "",
        worker ? field(child, "final_loss") : "", worker ? field(child, "test_accuracy") : "");
    std::cout << absl::StripTrailingAsciiWhitespace(row) << "\n";
  }
  std::cout << std::flush;
}

int Launcher::Run(const sigset_t& original_mask, int signal_fd) {
  original_mask_ = original_mask;
  signal_fd_ = signal_fd;
  start_time_ = absl::Now();

  absl::Status status = PrepareOutputDir();
  if (!status.ok()) {
    std::cerr << "launch_cluster: " << status.message() << "\n";
    return 2;
  }
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ >= 0) {
    inotify_add_watch(inotify_fd_, (fs::path(output_dir_) / "ports").c_str(),
                      IN_MOVED_TO | IN_CLOSE_WRITE);
  }
  const int servers = config::ServerProcessCount(config_);
  const int workers = config::WorkerProcessCount(config_);
  Say(absl::StrCat("experiment \"", config_.name(), "\": mode ", config_.mode(), ", model ",
                   config_.model().name(), ", ", servers, " server(s), ", workers,
                   " worker(s), batch ", config_.training().batch_size(), " per worker (",
                   config::GlobalBatchSize(config_), " in all)"));
  Say(absl::StrCat("output: ", output_dir_));

  // Servers first: the workers need their ports.
  for (Child& child : children_) {
    if (child.role != "server" || !status.ok()) continue;
    status = StartProcess(child, options_.server_binary,
                          {"--config=" + config_out_, absl::StrCat("--server_index=", child.index),
                           "--port_file=" + child.port_file});
  }
  if (status.ok() && servers > 0) {
    Say(absl::StrCat("started ", servers, " server(s); waiting for their ports"));
    status = WaitForPorts();
  }
  if (status.ok()) {
    std::vector<std::string> addresses;
    const std::string& host = config_.cluster().host();
    const std::string bracketed = absl::StrContains(host, ':') ? "[" + host + "]" : host;
    for (const Child& child : children_) {
      if (child.role == "server") addresses.push_back(absl::StrCat(bracketed, ":", *child.port));
    }
    for (Child& child : children_) {
      if (child.role != "worker" || !status.ok()) continue;
      status = StartProcess(
          child, options_.worker_binary,
          {"--config=" + config_out_, absl::StrCat("--rank=", child.index),
           "--servers=" + absl::StrJoin(addresses, ","), "--result_file=" + child.result_file,
           "--records_file=" + child.records_file});
      if (status.ok() && child.index == 0 && inotify_fd_ >= 0) {
        inotify_add_watch(inotify_fd_, child.log_path.c_str(), IN_MODIFY);
      }
    }
  }
  if (status.ok()) {
    Say(absl::StrCat("started ", workers,
                     " worker(s); rank 0's log: ", children_[servers].log_path));
    status = WaitForWorkers();
  }
  if (status.ok() && servers > 0) status = WaitForServers();
  if (status.ok()) status = ReadResults();
  if (status.ok()) status = WriteSummary();

  if (!status.ok()) {
    ClearProgressLine();
    std::cout << std::flush;
    if (absl::IsCancelled(status)) {
      std::cerr << "[p3] " << status.message() << "\n";
    } else {
      std::cerr << "[p3] FAILED: " << status.message() << "\n";
    }
    StopAll();
    PrintTable();
    std::cerr << "[p3] run failed; logs are in " << output_dir_ << "/logs" << std::endl;
    return absl::IsCancelled(status) ? 128 + interrupt_signal_ : 1;
  }

  std::cout << "\n";
  PrintTable();
  const Child& rank0 = children_[servers];
  auto number = [&rank0](const char* key) { return JsonValue(rank0.result.fields().at(key)); };
  Say(absl::StrCat("done in ",
                   absl::StrFormat("%.1f s", absl::ToDoubleSeconds(absl::Now() - start_time_)),
                   ": ", number("iterations"), " iterations, ", number("samples_per_second"),
                   " samples/s, final loss ", number("final_loss"), ", test accuracy ",
                   number("test_accuracy")));
  Say(absl::StrCat("summary: ", summary_path_));
  return 0;
}

// A relative path given on the command line: where `bazel run` was invoked if the file
// is there, else the current directory (the runfiles tree under `bazel run`).
std::string ResolveInputPath(const std::string& path, const std::string& invocation_dir) {
  fs::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  if (!invocation_dir.empty()) {
    const fs::path candidate = fs::path(invocation_dir) / p;
    std::error_code error;
    if (fs::exists(candidate, error)) return candidate.lexically_normal().string();
  }
  std::error_code error;
  return (fs::current_path(error) / p).lexically_normal().string();
}

// Removes every --set / -set argument from `argv` and returns their values in order:
// absl's repeated flags keep only the last value, and a value may contain commas.
std::vector<std::string> ExtractSetFlags(std::vector<char*>& argv) {
  std::vector<std::string> values;
  std::vector<char*> rest(argv.begin(), argv.begin() + 1);
  for (size_t i = 1; i < argv.size(); ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {  // Everything after "--" is left to absl (as positional).
      rest.insert(rest.end(), argv.begin() + i, argv.end());
      break;
    }
    if (absl::ConsumePrefix(&arg, "--set=") || absl::ConsumePrefix(&arg, "-set=")) {
      values.emplace_back(arg);
    } else if ((arg == "--set" || arg == "-set") && i + 1 < argv.size()) {
      values.emplace_back(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  argv = rest;
  return values;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args(argv, argv + argc);
  std::vector<std::string> overrides = ExtractSetFlags(args);
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() > 1) {
    std::cerr << "launch_cluster: unexpected argument \"" << positional[1]
              << "\"; config fields are set with --set=field.path=value\n";
    return 2;
  }

  // Set by `bazel run`: the directory it was invoked from. Flags are read here, in main,
  // and passed on as options.
  const char* invocation_env = std::getenv("BUILD_WORKING_DIRECTORY");
  const std::string invocation_dir = invocation_env != nullptr ? invocation_env : "";
  std::error_code error;
  LauncherOptions options;
  options.overrides = overrides;
  options.config_path = ResolveInputPath(absl::GetFlag(FLAGS_config), invocation_dir);
  options.server_binary = ResolveInputPath(absl::GetFlag(FLAGS_server_binary), invocation_dir);
  options.worker_binary = ResolveInputPath(absl::GetFlag(FLAGS_worker_binary), invocation_dir);
  options.working_dir = !invocation_dir.empty() ? invocation_dir : fs::current_path(error).string();
  options.kill_grace = absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_kill_grace_s)));
  options.log_tail_lines = std::max(1, absl::GetFlag(FLAGS_log_tail_lines));
  options.live_progress = isatty(STDOUT_FILENO) == 1;

  // Everything is checked before any process starts.
  absl::StatusOr<ExperimentConfig> config = config::LoadConfig(options.config_path, overrides);
  if (!config.ok()) {
    std::cerr << "launch_cluster: invalid config:\n" << config.status().message() << "\n";
    return 2;
  }
  for (const auto& [flag, path, needed] :
       {std::make_tuple("--server_binary", options.server_binary,
                        config::ServerProcessCount(*config) > 0),
        std::make_tuple("--worker_binary", options.worker_binary, true)}) {
    if (needed && access(path.c_str(), X_OK) != 0) {
      std::cerr << "launch_cluster: " << flag << ": " << path << " is not an executable file ("
                << std::strerror(errno) << "); build it (and list it in the launcher's data to "
                << "find it under bazel run) or pass " << flag << "=PATH\n";
      return 2;
    }
  }

  // Signals arrive through a signalfd read by the poll loop; children restore the
  // original mask before exec.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, sig);
  sigset_t original_mask;
  sigprocmask(SIG_BLOCK, &handled, &original_mask);
  const int signal_fd = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::cerr << "launch_cluster: signalfd: " << std::strerror(errno) << "\n";
    return 1;
  }
  Launcher launcher(std::move(options), *std::move(config));
  return launcher.Run(original_mask, signal_fd);
}

}  // namespace
}  // namespace p3::tools

int main(int argc, char** argv) { return p3::tools::Main(argc, argv); }
