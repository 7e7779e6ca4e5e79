#include "tools/launcher/process_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/launcher/netem.h"

namespace p3::tools::launcher {
namespace {

// In a forked child, before unblocking signals: the parent's handlers (a test framework's,
// say) must not run in the child if a signal arrives before exec. Ignored signals stay
// ignored, as exec would keep them. Async-signal-safe.
void ResetSignalHandlers() {
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current = {};
    if (sigaction(sig, nullptr, &current) != 0) continue;
    if (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN) continue;
    sigaction(sig, &default_action, nullptr);
  }
}

}  // namespace

bool ProcessState::exited_cleanly() const {
  return !running && pid > 0 && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

absl::StatusOr<std::unique_ptr<ProcessSupervisor>> ProcessSupervisor::Create(
    const Options& options) {
  std::unique_ptr<ProcessSupervisor> supervisor(new ProcessSupervisor(options));
  // Signals arrive through the signalfd read by WaitForEvent(); children restore the
  // original mask before exec.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, &supervisor->original_mask_);
  supervisor->signal_fd_ = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
  if (supervisor->signal_fd_ < 0) {
    const int error = errno;
    sigprocmask(SIG_SETMASK, &supervisor->original_mask_, nullptr);
    return absl::InternalError(absl::StrCat("signalfd: ", std::strerror(error)));
  }
  supervisor->inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  return supervisor;
}

ProcessSupervisor::~ProcessSupervisor() {
  for (size_t i = 0; i < processes_.size(); ++i) {
    ProcessState& process = processes_[i];
    if (stdin_fds_[i] >= 0) close(stdin_fds_[i]);
    if (!process.running) continue;
    kill(-process.pid, SIGKILL);
    kill(process.pid, SIGKILL);
    waitpid(process.pid, &process.wait_status, 0);
    process.running = false;
  }
  if (signal_fd_ >= 0) close(signal_fd_);
  if (inotify_fd_ >= 0) close(inotify_fd_);
  sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

absl::StatusOr<int> ProcessSupervisor::Start(const ProcessSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("no command to start");
  const std::string label = spec.label.empty() ? spec.argv[0] : spec.label;
  std::vector<std::string> argv = spec.argv;
  std::vector<char*> argv_ptrs;
  for (std::string& arg : argv) argv_ptrs.push_back(arg.data());
  argv_ptrs.push_back(nullptr);

  int stdin_pipe[2] = {-1, -1};
  if (spec.stdin_pipe && pipe2(stdin_pipe, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const int log_fd =
      open(spec.log_path.c_str(),
           O_WRONLY | O_CREAT | O_CLOEXEC | (spec.append_log ? O_APPEND : O_TRUNC), 0644);
  if (log_fd < 0) {
    const int error = errno;
    if (stdin_pipe[0] >= 0) close(stdin_pipe[0]);
    if (stdin_pipe[1] >= 0) close(stdin_pipe[1]);
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", spec.log_path, ": ", std::strerror(error)));
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int stdin_fd = stdin_pipe[0] >= 0 ? stdin_pipe[0] : null_fd;
  const char* ns_path = spec.ns_path.empty() ? nullptr : spec.ns_path.c_str();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    if (stdin_pipe[0] >= 0) close(stdin_pipe[0]);
    if (stdin_pipe[1] >= 0) close(stdin_pipe[1]);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start ", label, ": fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    setpgid(0, 0);  // Own process group: stopped as a group, deaf to the terminal's ^C.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // The launcher died before prctl.
    ResetSignalHandlers();
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    if (stdin_fd >= 0) dup2(stdin_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (ns_path != nullptr && EnterNamespace(ns_path) != 0) {
      const char message[] = "launch_cluster: cannot enter the network namespace ";
      (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
      (void)!write(STDERR_FILENO, ns_path, strlen(ns_path));
      (void)!write(STDERR_FILENO, "\n", 1);
      _exit(127);
    }
    execvp(argv_ptrs[0], argv_ptrs.data());
    const char message[] = "launch_cluster: exec failed: ";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    (void)!write(STDERR_FILENO, argv_ptrs[0], strlen(argv_ptrs[0]));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  setpgid(pid, pid);  // Also here, so that kill(-pid) works before the child runs.
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  if (stdin_pipe[0] >= 0) close(stdin_pipe[0]);
  ProcessState state;
  state.pid = pid;
  state.running = true;
  state.start_time = absl::Now();
  processes_.push_back(state);
  stdin_fds_.push_back(stdin_pipe[1]);
  return static_cast<int>(processes_.size()) - 1;
}

void ProcessSupervisor::WatchFile(const std::string& path) {
  if (inotify_fd_ >= 0) inotify_add_watch(inotify_fd_, path.c_str(), IN_MODIFY);
}

void ProcessSupervisor::WatchFolder(const std::string& path) {
  if (inotify_fd_ >= 0) inotify_add_watch(inotify_fd_, path.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE);
}

void ProcessSupervisor::Reap() {
  for (size_t i = 0; i < processes_.size(); ++i) {
    ProcessState& process = processes_[i];
    if (!process.running) continue;
    int status = 0;
    if (waitpid(process.pid, &status, WNOHANG) == process.pid) {
      process.running = false;
      process.wait_status = status;
      process.end_time = absl::Now();
      if (stdin_fds_[i] >= 0) {
        close(stdin_fds_[i]);
        stdin_fds_[i] = -1;
      }
    }
  }
}

void ProcessSupervisor::WaitForEvent(absl::Duration timeout) {
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

absl::Status ProcessSupervisor::InterruptedError() const {
  const char* abbrev = sigabbrev_np(interrupt_signal_);
  return absl::CancelledError(absl::StrCat(
      "interrupted by ", abbrev != nullptr ? absl::StrCat("SIG", abbrev)
                                           : absl::StrCat("signal ", interrupt_signal_)));
}

void ProcessSupervisor::Stop(const std::vector<int>& ids, const std::vector<std::string>& names,
                             const std::function<void(const std::string&)>& say) {
  std::vector<int> running;
  std::vector<std::string> running_names;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!processes_[ids[i]].running) continue;
    running.push_back(ids[i]);
    running_names.push_back(i < names.size() ? names[i] : absl::StrCat("pid ", ids[i]));
  }
  if (running.empty()) return;
  say(absl::StrCat("stopping ", absl::StrJoin(running_names, ", "), " (SIGTERM)"));
  for (int id : running) kill(-processes_[id].pid, SIGTERM);

  const int interrupts_before = interrupt_count_;
  const absl::Time deadline = absl::Now() + options_.kill_grace;
  while (true) {
    bool any = false;
    for (int id : running) any = any || processes_[id].running;
    if (!any) return;
    const absl::Time now = absl::Now();
    // A further ^C means "now": skip the grace period.
    if (now >= deadline || interrupt_count_ > interrupts_before) break;
    WaitForEvent(deadline - now);
  }
  for (size_t i = 0; i < running.size(); ++i) {
    if (!processes_[running[i]].running) continue;
    say(absl::StrCat(running_names[i], " did not stop; sending SIGKILL"));
    kill(-processes_[running[i]].pid, SIGKILL);
  }
  for (int id : running) {
    ProcessState& process = processes_[id];
    if (!process.running) continue;
    int status = 0;
    if (waitpid(process.pid, &status, 0) == process.pid) {
      process.running = false;
      process.wait_status = status;
      process.end_time = absl::Now();
      if (stdin_fds_[id] >= 0) {
        close(stdin_fds_[id]);
        stdin_fds_[id] = -1;
      }
    }
  }
}

bool ProcessSupervisor::RunQuietly(const std::vector<std::string>& argv,
                                   const std::string& stdout_path) {
  if (argv.empty()) return false;
  std::vector<std::string> args = argv;
  std::vector<char*> ptrs;
  for (std::string& arg : args) ptrs.push_back(arg.data());
  ptrs.push_back(nullptr);
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  const int out_fd = stdout_path.empty() ? null_fd
                                         : open(stdout_path.c_str(),
                                                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) {
    if (null_fd >= 0) close(null_fd);
    return false;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    ResetSignalHandlers();
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    execvp(ptrs[0], ptrs.data());
    _exit(127);
  }
  if (out_fd != null_fd) close(out_fd);
  if (null_fd >= 0) close(null_fd);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrCat("was killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

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

}  // namespace p3::tools::launcher
