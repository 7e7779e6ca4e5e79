#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tools/launcher/process_supervisor.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return (fs::path(tmp != nullptr ? tmp : "/tmp") / name).string();
}

std::unique_ptr<ProcessSupervisor> NewSupervisor(absl::Duration kill_grace = absl::Seconds(5)) {
  ProcessSupervisor::Options options;
  options.kill_grace = kill_grace;
  absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor =
      ProcessSupervisor::Create(options);
  CATCH_REQUIRE(supervisor.ok());
  return *std::move(supervisor);
}

// Waits (on SIGCHLD, not by polling a clock) until process `id` has ended.
void WaitForExit(ProcessSupervisor& supervisor, int id) {
  while (supervisor.process(id).running) supervisor.WaitForEvent(absl::Seconds(30));
}

CATCH_TEST_CASE("a child's output goes to its log and its exit status is reported") {
  std::unique_ptr<ProcessSupervisor> supervisor = NewSupervisor();
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"};
  spec.log_path = TempPath("exit3.log");
  absl::StatusOr<int> id = supervisor->Start(spec);
  CATCH_REQUIRE(id.ok());
  CATCH_CHECK(*id == 0);
  WaitForExit(*supervisor, *id);
  const ProcessState& state = supervisor->process(*id);
  CATCH_CHECK(state.pid > 0);
  CATCH_CHECK(!state.exited_cleanly());
  CATCH_CHECK(DescribeWaitStatus(state.wait_status) == "exited with status 3");
  CATCH_CHECK(TailOfFile(spec.log_path, 20) == "hello\noops");
  CATCH_CHECK(supervisor->interrupt_signal() == 0);
}

CATCH_TEST_CASE("a restarted process appends to the log of the one it replaces") {
  std::unique_ptr<ProcessSupervisor> supervisor = NewSupervisor();
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo first; kill -9 $$"};
  spec.log_path = TempPath("restarted.log");
  absl::StatusOr<int> first = supervisor->Start(spec);
  CATCH_REQUIRE(first.ok());
  WaitForExit(*supervisor, *first);
  spec.argv = {"/bin/sh", "-c", "echo second"};
  spec.append_log = true;
  absl::StatusOr<int> second = supervisor->Start(spec);
  CATCH_REQUIRE(second.ok());
  WaitForExit(*supervisor, *second);
  CATCH_CHECK(supervisor->process(*second).exited_cleanly());
  CATCH_CHECK(TailOfFile(spec.log_path, 20) == "first\nsecond");
  // Without append_log the log starts afresh.
  spec.append_log = false;
  absl::StatusOr<int> third = supervisor->Start(spec);
  CATCH_REQUIRE(third.ok());
  WaitForExit(*supervisor, *third);
  CATCH_CHECK(TailOfFile(spec.log_path, 20) == "second");
}

CATCH_TEST_CASE("a binary that cannot be executed exits 127 and says so in its log") {
  std::unique_ptr<ProcessSupervisor> supervisor = NewSupervisor();
  ProcessSpec spec;
  spec.argv = {TempPath("no_such_binary")};
  spec.log_path = TempPath("exec_fails.log");
  absl::StatusOr<int> id = supervisor->Start(spec);
  CATCH_REQUIRE(id.ok());
  WaitForExit(*supervisor, *id);
  CATCH_CHECK(DescribeWaitStatus(supervisor->process(*id).wait_status) == "exited with status 127");
  CATCH_CHECK(absl::StrContains(TailOfFile(spec.log_path, 5), "exec failed: "));
}

CATCH_TEST_CASE("a log that cannot be created is an error and nothing starts") {
  std::unique_ptr<ProcessSupervisor> supervisor = NewSupervisor();
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  spec.log_path = TempPath("no_such_folder/x.log");
  absl::StatusOr<int> id = supervisor->Start(spec);
  CATCH_CHECK(!id.ok());
  CATCH_CHECK(supervisor->process_count() == 0);
}

CATCH_TEST_CASE("Stop sends SIGTERM to a running child and reports it") {
  std::unique_ptr<ProcessSupervisor> supervisor = NewSupervisor();
  ProcessSpec spec;
  spec.argv = {"/bin/cat"};  // Reads the pipe the supervisor holds open: runs until stopped.
  spec.stdin_pipe = true;
  spec.log_path = TempPath("cat.log");
  absl::StatusOr<int> id = supervisor->Start(spec);
  CATCH_REQUIRE(id.ok());
  CATCH_CHECK(supervisor->process(*id).running);
  std::vector<std::string> said;
  supervisor->Stop({*id}, {"cat_0"}, [&](const std::string& line) { said.push_back(line); });
  CATCH_CHECK(!supervisor->process(*id).running);
  CATCH_CHECK(DescribeWaitStatus(supervisor->process(*id).wait_status) ==
              "was killed by signal 15 (Terminated)");
  CATCH_CHECK(said == std::vector<std::string>{"stopping cat_0 (SIGTERM)"});
}

CATCH_TEST_CASE("a further termination signal while stopping skips the grace period: SIGKILL") {
  // A grace period no test would wait for: only the signal can end it early.
  std::unique_ptr<ProcessSupervisor> supervisor = NewSupervisor(absl::Hours(1));
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "trap '' TERM; echo ready; exec cat"};
  spec.stdin_pipe = true;
  spec.log_path = TempPath("ignores_term.log");
  std::ofstream(spec.log_path).close();
  supervisor->WatchFile(spec.log_path);
  absl::StatusOr<int> id = supervisor->Start(spec);
  CATCH_REQUIRE(id.ok());
  // The trap is set once "ready" is in the log (inotify wakes the wait).
  while (TailOfFile(spec.log_path, 1) != "ready" && supervisor->process(*id).running) {
    supervisor->WaitForEvent(absl::Seconds(30));
  }
  CATCH_REQUIRE(TailOfFile(spec.log_path, 1) == "ready");
  kill(getpid(), SIGHUP);  // Blocked: it waits in the signalfd.
  std::vector<std::string> said;
  supervisor->Stop({*id}, {"stubborn"}, [&](const std::string& line) { said.push_back(line); });
  CATCH_CHECK(DescribeWaitStatus(supervisor->process(*id).wait_status) ==
              "was killed by signal 9 (Killed)");
  CATCH_CHECK(said == std::vector<std::string>{"stopping stubborn (SIGTERM)",
                                               "stubborn did not stop; sending SIGKILL"});
  CATCH_CHECK(supervisor->interrupt_signal() == SIGHUP);
  CATCH_CHECK(supervisor->interrupt_count() == 1);
  CATCH_CHECK(supervisor->InterruptedError().message() == "interrupted by SIGHUP");
}

CATCH_TEST_CASE("destroying the supervisor kills and reaps the children still running") {
  pid_t pid = -1;
  {
    std::unique_ptr<ProcessSupervisor> supervisor = NewSupervisor();
    ProcessSpec spec;
    spec.argv = {"/bin/cat"};
    spec.stdin_pipe = true;
    spec.log_path = TempPath("orphan.log");
    absl::StatusOr<int> id = supervisor->Start(spec);
    CATCH_REQUIRE(id.ok());
    pid = supervisor->process(*id).pid;
    CATCH_CHECK(kill(pid, 0) == 0);
  }
  errno = 0;
  CATCH_CHECK(kill(pid, 0) == -1);
  CATCH_CHECK(errno == ESRCH);  // Reaped, not a zombie.
}

CATCH_TEST_CASE("RunQuietly runs a command to completion with its stdout to a file") {
  std::unique_ptr<ProcessSupervisor> supervisor = NewSupervisor();
  const std::string out = TempPath("quiet.out");
  CATCH_CHECK(supervisor->RunQuietly({"/bin/sh", "-c", "echo archive; echo noise >&2"}, out));
  CATCH_CHECK(TailOfFile(out, 5) == "archive");
  CATCH_CHECK(!supervisor->RunQuietly({"/bin/sh", "-c", "exit 1"}, ""));
  CATCH_CHECK(!supervisor->RunQuietly({TempPath("no_such_binary")}, ""));
}

CATCH_TEST_CASE("TailOfFile keeps the last lines; a missing file has none") {
  const std::string path = TempPath("tail.txt");
  std::ofstream(path) << "1\n2\n3\n4\n";
  CATCH_CHECK(TailOfFile(path, 2) == "3\n4");
  CATCH_CHECK(TailOfFile(path, 10) == "1\n2\n3\n4");
  CATCH_CHECK(TailOfFile(TempPath("missing.txt"), 3).empty());
}

}  // namespace
}  // namespace p3::tools::launcher
