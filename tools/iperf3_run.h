// iperf3 on a link, and the host's CPU over it: the TCP reference of bench_streaming
// (tools/bench_streaming_main.cc, docs/results/streaming/streaming.md), one direction or
// both at once (iperf3 --bidir, as P3's streaming moves gradients up and values down).
// iperf3 3.12 runs one thread per end, so on loopback --bidir is bound by that thread
// (about half the one-way rate each way here), not by TCP: two opposite one-way pairs
// move 0.93 of it (tools/experiments/iperf3_directions.py); bench_streaming takes the
// two pairs (Iperf3Options::two_pairs) as its both-directions reference.
//
// Example:
//   ProcessSupervisor* sup = ...;  // started while the caller has one thread
//   P3_ASSIGN_OR_RETURN(Iperf3Result r,
//                       RunIperf3(sup, {.dir = "/tmp/x", .host = "127.0.0.1", .seconds = 2,
//                                       .bidir = true}));
//   // r.gbps (up), r.reverse_gbps (down), r.host.busy_ticks over the client's run
//
// Functions, no state: safe from any thread that owns the supervisor it is given.
#ifndef P3_TOOLS_IPERF3_RUN_H_
#define P3_TOOLS_IPERF3_RUN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/launcher/process_supervisor.h"

namespace p3::tools {

// The host's cores, from the first line of /proc/stat (clock ticks): the work of every
// process and of the kernel outside any (softirq in an idle core's context: the emulated
// links' forwarding, tbf's timers), and the softirq share of it. Steal is not work.
// Kept in ticks, so that the difference of two readings is exact: busy >= softirq holds
// for the differences too (in seconds, rounding could put busy a hair below softirq).
struct HostCpu {
  int64_t busy_ticks = 0;
  int64_t softirq_ticks = 0;
};

// The host's work between two readings.
HostCpu Elapsed(const HostCpu& from, const HostCpu& to);

double TicksToSeconds(int64_t ticks);

absl::StatusOr<HostCpu> ReadHostCpu();

// Waits for child `id` to end, at most `timeout`; its exit status must be 0. `log` is
// quoted in the error.
absl::Status WaitForExit(launcher::ProcessSupervisor* sup, int id, const std::string& what,
                         const std::string& log, absl::Duration timeout);

// Waits until `text` appears in the file at `path` (a child's log) or the child ends.
absl::Status WaitForText(launcher::ProcessSupervisor* sup, int id, const std::string& path,
                         const std::string& text, absl::Duration timeout);

// What iperf3 measured on a link. The forward direction is its client's sending (the
// worker's machine to the server's: the gradients' way); with --bidir the reverse one
// (the server's machine to the worker's: the values' way) runs at the same time.
struct Iperf3Result {
  bool bidir = false;
  double gbps = 0;     // The forward receiver's rate.
  int64_t bytes = 0;   // Payload the forward receiver got.
  double seconds = 0;  // iperf3's own test time (the forward receiver's).
  // With bidir only: the reverse direction, as its receiver (the client) got it.
  double reverse_gbps = 0;
  int64_t reverse_bytes = 0;
  // The whole host over the client's run, read from /proc/stat as for bench_streaming's
  // window: the client's start and its closing exchange of results are in it too
  // (milliseconds). Filled by RunIperf3, not by the parser.
  HostCpu host;
  // iperf3's own figures (getrusage of each process over its test, as a percentage of
  // one core): the client's and the server's. With bidir each process both sends and
  // receives.
  double sender_cpu_percent = 0;
  double receiver_cpu_percent = 0;

  // Payload received, both directions (bytes + reverse_bytes; bytes alone one-way).
  int64_t total_bytes() const { return bytes + reverse_bytes; }
  // The host's busy seconds over the run per GB of total_bytes(): iperf3's cost against
  // which bench_streaming and grpc_api_probe set theirs. 0 where no tick moved or no byte
  // arrived.
  double host_cpu_s_per_gb() const;
};

// The figures of iperf3's -J report `json` (its client's), one direction or, with
// `bidir`, both (end.sum_received and end.sum_received_bidir_reverse). An error names
// what is missing; a report with no bytes received in a direction is an error.
absl::StatusOr<Iperf3Result> ParseIperf3Report(const std::string& json, bool bidir);

struct Iperf3Options {
  // Folder for the logs: <name>_server.log and <name>_client.json. Required.
  std::string dir;
  // The server's address (the client connects to it). Required.
  std::string host;
  // Network namespaces (paths) of the server and the client; "": this process's.
  std::string server_ns;
  std::string client_ns;
  // Whole seconds (iperf3's -t truncates, and -t 0 never ends). Default: 2.
  int seconds = 2;
  // Both directions at once. Default: one direction.
  bool bidir = false;
  // With bidir: as two independent one-way tests in opposite directions started
  // together (a second server, and a second client with -R: its server sends), so each
  // direction has its own sending and receiving process, as P3's worker and server each
  // have a writer and a reader thread. Without it, iperf3 --bidir (one thread per end).
  // Logs <name>_server.log / <name>_client.json for the forward pair and
  // <name>_reverse_server.log / <name>_reverse_client.json for the other.
  bool two_pairs = false;
  // Prefix of the log files. Default: "iperf3".
  std::string name = "iperf3";
};

// Runs an iperf3 server (-1: one test) in `server_ns` and a client in `client_ns` for
// `seconds` (two of each with two_pairs), with the host's CPU read around the clients'
// run. With two_pairs the result is as --bidir's: the forward pair's figures, the reverse
// pair's as reverse_*, and iperf3's own CPU of all four processes (sender: the forward
// client and the reverse server; receiver: the other two).
absl::StatusOr<Iperf3Result> RunIperf3(launcher::ProcessSupervisor* sup,
                                       const Iperf3Options& options);

}  // namespace p3::tools

#endif  // P3_TOOLS_IPERF3_RUN_H_
