// A process's CPU time and its threads' context switches, read from /proc, and the
// host's load: what
// bench_streaming (tools/bench_streaming_main.cc) counts over its measured window for
// the servers it started, and for itself.
//
// Example:
//   P3_ASSIGN_OR_RETURN(double cpu0, ProcessCpuSeconds(server_pid));
//   P3_ASSIGN_OR_RETURN(ContextSwitches sw0, ThreadContextSwitches(server_pid));
//   ... the window ...
//   P3_ASSIGN_OR_RETURN(ContextSwitches sw1, ThreadContextSwitches(server_pid));
//   const ContextSwitches in_window = sw1 - sw0;   // sleeps: in_window.voluntary
//
// Functions, no state: safe from any thread. Every figure is of threads alive when read:
// a thread that ends between two readings takes its counts with it (the worker library's
// and p3_server's threads live as long as their streams, so a window between a Sync()
// and the next loses none of theirs).
#ifndef P3_TOOLS_PROC_STATS_H_
#define P3_TOOLS_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace p3::tools {

// utime + stime of process `pid` (every thread, alive or ended), from /proc/<pid>/stat, in
// seconds (clock ticks: 1/100 s here).
absl::StatusOr<double> ProcessCpuSeconds(pid_t pid);

// The calling process's CPU time, every thread (getrusage: microseconds), and the calling
// thread's alone (CLOCK_THREAD_CPUTIME_ID), in seconds.
double SelfCpuSeconds();
double ThreadCpuSeconds();

// The 1-minute load average (/proc/loadavg); -1 where it cannot be read.
double Load1();

// Context switches of a process's threads, summed over /proc/<pid>/task/*/status.
struct ContextSwitches {
  // The thread gave up its core not runnable: it blocked (on a socket, a futex, epoll),
  // and each such switch ends with a wake-up.
  int64_t voluntary = 0;
  // The thread was switched out still runnable: preempted.
  int64_t involuntary = 0;
  int threads = 0;  // Threads read.

  ContextSwitches operator-(const ContextSwitches& earlier) const {
    return {voluntary - earlier.voluntary, involuntary - earlier.involuntary, threads};
  }
  // Two sets of threads together (two processes').
  ContextSwitches operator+(const ContextSwitches& other) const {
    return {voluntary + other.voluntary, involuntary + other.involuntary,
            threads + other.threads};
  }
};

absl::StatusOr<ContextSwitches> ThreadContextSwitches(pid_t pid);

// The two counts of one /proc/<pid>/task/<tid>/status text; an error names the line
// missing. (Exposed for the test.)
absl::StatusOr<ContextSwitches> ParseStatusSwitches(const std::string& status_text);

// utime + stime of one /proc/<pid>/stat text, in clock ticks; the command name (field 2)
// may hold spaces and parentheses. (Exposed for the test.)
absl::StatusOr<int64_t> ParseStatCpuTicks(const std::string& stat_text);

}  // namespace p3::tools

#endif  // P3_TOOLS_PROC_STATS_H_
