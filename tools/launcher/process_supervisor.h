// Starting and supervising the launcher's child processes without threads and without
// sleeping: one poll() waits on a signalfd (SIGCHLD and the termination signals SIGINT,
// SIGTERM, SIGHUP) and an inotify descriptor (files the caller watches), then reaps the
// children that exited.
//
// Each child runs in its own process group (stopping it stops what it started; the
// terminal's ^C reaches only the launcher) with PR_SET_PDEATHSIG = SIGKILL (it dies with
// the launcher, even one killed with SIGKILL), stdout and stderr to its log file, and
// stdin from /dev/null or from a pipe the supervisor holds (ssh: closing it stops the
// remote process). It may first enter a network namespace (tools/launcher/netem.h).
//
// Example:
//   absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor =
//       ProcessSupervisor::Create(ProcessSupervisor::Options{});
//   ProcessSpec spec;
//   spec.argv = {"/bin/echo", "hello"};
//   spec.log_path = "/tmp/echo.log";
//   absl::StatusOr<int> id = (*supervisor)->Start(spec);
//   while ((*supervisor)->process(*id).running) (*supervisor)->WaitForEvent(absl::Seconds(1));
//   std::cout << DescribeWaitStatus((*supervisor)->process(*id).wait_status);  // exited with
//   status 0
//
// Thread-compatible, and meant for a single-threaded program: Create() blocks the handled
// signals in the calling thread (the destructor restores the mask), and fork() is only
// safe without other threads. At most one supervisor at a time.
#ifndef P3_TOOLS_LAUNCHER_PROCESS_SUPERVISOR_H_
#define P3_TOOLS_LAUNCHER_PROCESS_SUPERVISOR_H_

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace p3::tools::launcher {

// How to start one child.
struct ProcessSpec {
  // argv[0] is an absolute path or a name looked up in PATH (ssh).
  std::vector<std::string> argv;
  // Receives stdout and stderr (created or truncated; see append_log).
  std::string log_path;
  // Append to log_path instead of truncating it (a restarted process continues the log of
  // the one it replaces). Default: false.
  bool append_log = false;
  // A network namespace (/run/netns/...) to enter before exec; empty: none. Default: empty.
  std::string ns_path;
  // stdin is a pipe whose write end the supervisor holds until the child exits; else
  // /dev/null. Default: false.
  bool stdin_pipe = false;
  // For messages: "worker 1". Default: argv[0].
  std::string label;
};

// A started child.
struct ProcessState {
  pid_t pid = -1;
  bool running = false;
  // waitpid() status once it ended.
  int wait_status = 0;
  absl::Time start_time;
  absl::Time end_time;

  // Ended, with exit status 0.
  bool exited_cleanly() const;
};

class ProcessSupervisor {
 public:
  struct Options {
    // Between SIGTERM and SIGKILL in Stop(). Default: 5 seconds.
    absl::Duration kill_grace = absl::Seconds(5);
  };

  // Blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP and reads them from a signalfd; sets up
  // inotify (without it, Watch() does nothing and waits end only by timeout or signal).
  static absl::StatusOr<std::unique_ptr<ProcessSupervisor>> Create(const Options& options);

  // Kills (SIGKILL) and reaps every child still running, closes the descriptors and
  // restores the signal mask.
  ~ProcessSupervisor();

  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Forks and execs `spec`; returns its id (0, 1, ... in start order). An exec failure
  // shows as the child exiting 127 with the reason in its log.
  absl::StatusOr<int> Start(const ProcessSpec& spec);

  const ProcessState& process(int id) const { return processes_[id]; }
  int process_count() const { return static_cast<int>(processes_.size()); }

  // WaitForEvent() also returns when `path` changes: IN_MODIFY for a file, or a file
  // being closed after writing / renamed into it for a folder.
  void WatchFile(const std::string& path);
  void WatchFolder(const std::string& path);

  // Waits at most `timeout` for a signal, a child's exit or a watched change, then reaps
  // the children that exited.
  void WaitForEvent(absl::Duration timeout);

  // The first termination signal received (0: none), and how many were received.
  int interrupt_signal() const { return interrupt_signal_; }
  int interrupt_count() const { return interrupt_count_; }
  // Cancelled error "interrupted by SIGTERM".
  absl::Status InterruptedError() const;

  // Stops the running ones of `ids`: SIGTERM to their process groups, then after
  // kill_grace (or at once on a further termination signal) SIGKILL, and reaps them.
  // `say` reports what is done ("stopping worker_0 (SIGTERM)").
  void Stop(const std::vector<int>& ids, const std::vector<std::string>& names,
            const std::function<void(const std::string&)>& say);

  // Runs `argv` to completion with stdout to `stdout_path` (/dev/null when empty) and
  // stdin and stderr to /dev/null; true if it exited 0. Blocks.
  bool RunQuietly(const std::vector<std::string>& argv, const std::string& stdout_path);

 private:
  explicit ProcessSupervisor(const Options& options) : options_(options) {}
  void Reap();

  const Options options_;
  std::vector<ProcessState> processes_;
  std::vector<int> stdin_fds_;  // Per process; -1 when none.
  sigset_t original_mask_;
  int signal_fd_ = -1;
  int inotify_fd_ = -1;
  int interrupt_signal_ = 0;
  int interrupt_count_ = 0;
};

// "exited with status 3", "was killed by signal 15 (Terminated)".
std::string DescribeWaitStatus(int wait_status);

// The last `lines` lines of the file at `path` (at most its last 64 KiB); "" when it
// cannot be read.
std::string TailOfFile(const std::string& path, int lines);

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_PROCESS_SUPERVISOR_H_
