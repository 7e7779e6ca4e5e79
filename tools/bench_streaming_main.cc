// bench_streaming: a streaming micro-benchmark of P3's data path (docs/results/streaming/streaming.md).
//
// One worker and one server move slices with no computation worth the name: the worker
// is the real worker library (worker/worker.h, hence worker/server_connection.h) over a
// synthetic BlockModel of large one-dimensional parameters whose forward pass is a mean
// per parameter; the server is the real //server:p3_server binary, started by this
// program. Each iteration pushes every parameter's gradient (P x 4 bytes up) and receives
// every updated value (P x 4 bytes down), exactly as training does.
//
//   bench_streaming --server_binary=bazel-bin/server/p3_server                  # loopback
//   bench_streaming --server_binary=... --bandwidth_gbps=2.5 --iperf3_seconds=3  # root
//   bench_streaming --server_binary=... --shared_memory       # the colocated path
//   bench_streaming --server_binary=... --bandwidth_gbps=5 --trace_json=/tmp/t.json  # timeline
//   bench_streaming --server_binary=... --bandwidth_gbps=1 --servers=3   # 3 streams, one link
//
// With --bandwidth_gbps > 0 it builds a 2-machine emulated network with the launcher's
// own code (tools/launcher/netem.h: namespaces, a bridge, tbf both ways), runs the server
// on machine 1 and itself (the worker) on machine 0. With --iperf3_seconds > 0 it first
// measures the same link (or loopback) with iperf3, worker's machine -> server's machine:
// its rate, and the host's CPU for it measured as for our run. Then (unless
// --iperf3_bidir=false) both directions at once for as long on the same link, P3's own
// pattern, where on loopback both directions share the same cores: by default as two
// opposite one-way iperf3 pairs started together (--iperf3_bidir_method=two_pairs), or
// as iperf3 --bidir (=bidir), whose one thread per end halves loopback's rate
// (tools/iperf3_run.h).
//
// Measured window: after --warmup iterations and a Sync() (every value of the current
// version arrived), `--iterations` more iterations and a final Sync(). In that window:
// wall time, the worker's payload bytes each way (WorkerStats), the worker's CPU time
// (getrusage: every thread of this process) with the training thread's own share, and
// the server's (utime + stime from /proc/<pid>/stat), and the whole host's busy time
// (/proc/stat: the kernel's work outside both processes too, softirq included). The
// host's figures count every other process's work as well: they mean something on an
// otherwise idle host only (load1_start says how idle it was).
//
// How a GB is counted: every CPU-per-GB figure is per GB (1e9 bytes) of payload that
// crossed from one process to the other, whichever the direction. Ours moves gradients up
// and values down at once, so its GB are bytes_sent + bytes_received; iperf3 moves one
// direction, so its GB are the bytes its receiver got. Both ends run on this host, so
// either figure holds one send and one receive of each byte: the two compare like for
// like. Fields:
//   host_cpu_s_per_gb         host busy s (incl. softirq) / (sent + received) GB
//   cpu_s_per_gb              worker + server process CPU s / (sent + received) GB
//   iperf3_host_cpu_s_per_gb  host busy s over iperf3's client run / iperf3's GB, read from
//                             /proc/stat as ours (iperf3_host_busy_s, iperf3_softirq_s)
//   iperf3_cpu_s_per_gb       iperf3's own figures (its JSON's cpu_utilization_percent:
//                             iperf3_sender_cpu_percent + iperf3_receiver_cpu_percent, of
//                             one core) x its test time / its GB: cpu_s_per_gb's counterpart
//   cpu_ratio_to_iperf3       host_cpu_s_per_gb / iperf3_host_cpu_s_per_gb (the issue's
//                             target: <= 1.25); absent when iperf3's window had no tick
//   ratio                     goodput_up_gbps / iperf3_gbps
// With --iperf3_bidir (both directions at once: its GB are both directions' received
// bytes, as ours):
//   iperf3_bidir_method       "two_pairs" or "bidir" (--iperf3_bidir_method)
//   iperf3_bidir_up_gbps, iperf3_bidir_down_gbps
//                             each direction's received rate (client -> server: the
//                             gradients' way; server -> client: the values')
//   iperf3_bidir_gbps         their mean: the rate per direction of the same traffic split
//                             evenly, as ours is (iperf3's two streams need not balance;
//                             on loopback what one takes of the cores the other cannot
//                             have, so the lower one would understate the link)
//   iperf3_bidir_host_cpu_s_per_gb  host busy s over the client's run / both directions' GB
//                             (iperf3_bidir_host_busy_s, iperf3_bidir_softirq_s,
//                             iperf3_bidir_bytes)
//   iperf3_bidir_cpu_s_per_gb iperf3's own figures, as iperf3_cpu_s_per_gb
//   ratio_to_iperf3_bidir     goodput_up_gbps / iperf3_bidir_gbps (context beside `ratio`,
//                             which stays the target)
//   cpu_ratio_to_iperf3_bidir host_cpu_s_per_gb / iperf3_bidir_host_cpu_s_per_gb
// With --shared_memory it first times memcpy on this machine (one thread, one buffer
// of the gradients' size, at least 64 MiB, into another; median of --memcpy_runs):
//   memcpy_gbps               Gbit/s of payload copied, the unit of goodput
//   goodput_to_memcpy         goodput_up_gbps / memcpy_gbps (the target: >= 0.5);
//                             the values come down at the same time, as much again
//   memcpy_cpu_s_per_gb       the copying thread's CPU s per GB copied (clock_gettime),
//                             beside host_cpu_s_per_gb
// The worker's and the server's heaps are in transparent huge pages, as a launcher's
// processes' are (p3/base/allocator.h); GLIBC_TUNABLES=glibc.malloc.hugetlb=0 turns that off.
//   glibc_tunables            GLIBC_TUNABLES as both processes started
//   process_name              this process's name (/proc/self/comm): "bench_streaming"
// Reads are sized to the message, as the launcher's processes' are (scheduling.sized_reads,
// p3/base/grpc_experiments.h), unless --sized_reads=false or GRPC_EXPERIMENTS is set:
//   grpc_experiments          GRPC_EXPERIMENTS as both processes started
//   window_start_us, window_end_us  the measured window on --trace_json's clock
// With --servers=N, N servers on the server's machine, a stream each from the worker (slice
// i to server i mod N), share its link; server_cpu_s sums them. In the window, the threads'
// context switches (tools/proc_stats.h; threads alive at both readings):
//   servers
//   worker_voluntary_switches, worker_involuntary_switches  the worker's threads: blocked
//                             (each ends with a wake-up), and preempted while runnable
//   server_voluntary_switches, server_involuntary_switches  every server's, summed
//   credit_bytes              --credit_bytes, the worker's and the servers' credit
// Prints one JSON object on stdout (and writes it to --result_json). Exit status 0, or 1
// with the reason on stderr.
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "models/model.h"
#include "nlohmann/json.hpp"
#include "p3/base/allocator.h"
#include "p3/base/build_commit.h"
#include "p3/base/file_util.h"
#include "p3/base/stats.h"
#include "p3/base/status_macros.h"
#include "p3/base/trace.h"
#include "proto/program.h"
#include "tools/iperf3_run.h"
#include "tools/proc_stats.h"
#include "tools/launcher/netem.h"
#include "tools/launcher/process_supervisor.h"
#include "worker/worker.h"

ABSL_FLAG(std::string, server_binary, "", "the p3_server executable (required)");
ABSL_FLAG(double, bandwidth_gbps, 0,
          "emulated link per machine and direction (root); 0: loopback, no shaping");
ABSL_FLAG(int64_t, params, 25'000'000, "parameters in total (4 bytes each, each direction)");
ABSL_FLAG(int, servers, 1,
          "p3_server processes on the server's machine, one stream each from the worker "
          "(slice i to server i mod N): N streams share the one link");
ABSL_FLAG(int64_t, credit_bytes, 0,
          "scheduling.credit_bytes of the worker and the servers: bytes handed to gRPC and "
          "not yet in the kernel, shared by a process's streams (0: one message at a time)");
ABSL_FLAG(int, tensors, 10, "number of parameters (one block each), of equal size");
ABSL_FLAG(int64_t, slice_params, 40'000, "slice size in parameters (scheduling.slice_params)");
ABSL_FLAG(int, warmup, 2, "iterations before the measured window");
ABSL_FLAG(int, iterations, 5, "iterations measured");
ABSL_FLAG(double, iperf3_seconds, 0,
          "measure the same link with iperf3 first, whole seconds; 0: skip");
ABSL_FLAG(bool, iperf3_bidir, true,
          "with --iperf3_seconds: also both directions at once on the same link for as long, "
          "after the one-way run (as P3's streaming moves them)");
ABSL_FLAG(std::string, iperf3_bidir_method, "two_pairs",
          "how --iperf3_bidir loads both directions: two_pairs (two opposite one-way iperf3 "
          "tests at once: a sender and a receiver process per direction) or bidir (iperf3 "
          "--bidir: one thread per end, which halves loopback)");
ABSL_FLAG(std::string, out_dir, "",
          "folder for the server's config, logs; default: a temporary one");
ABSL_FLAG(std::string, result_json, "", "also write the result here");
ABSL_FLAG(bool, shared_memory, false,
          "worker and server on this machine exchange values through shared memory (the "
          "colocated path); loopback only. Also measures memcpy on this machine");
ABSL_FLAG(std::string, trace_json, "",
          "also record the worker's timeline (compute, waits for parameters, each slice sent "
          "and received) and write it here as Chrome trace JSON, as worker 0 of a launcher's "
          "trace (pid 100): tools/experiments/link_idle.py analyse reads it");
ABSL_FLAG(int, memcpy_runs, 5, "with --shared_memory: timed memcpy runs (median)");
ABSL_FLAG(bool, sized_reads, true,
          "reads sized to the message in both processes (scheduling.sized_reads); a "
          "GRPC_EXPERIMENTS in the environment wins");

namespace p3::tools {
namespace {

using launcher::ProcessSpec;
using launcher::ProcessSupervisor;

// The least memcpy copies, so that a small --params (the tests') still copies through
// memory, not a cache: the source and destination together are 4x the development
// machine's 32 MiB last-level cache. The default 25 M parameters copy their own 100 MB.
constexpr int64_t kMinMemcpyBytes = int64_t{64} << 20;

// `tensors` blocks of one flat parameter each. Forward: x + mean(p) per block, so the
// gradient of each parameter is a broadcast scalar: the compute is one read of the
// parameters forward and autograd's materialised gradient backward, no matrix products.
class StreamingModel : public models::BlockModel {
 public:
  StreamingModel(int tensors, int64_t per_tensor) {
    for (int i = 0; i < tensors; ++i) {
      params_.push_back(register_parameter(absl::StrCat("p", i), torch::full({per_tensor}, 0.01f)));
    }
  }
  int64_t num_blocks() const override { return static_cast<int64_t>(params_.size()); }
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    return x + params_[i].mean();
  }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override { return {params_[i]}; }
  std::string BlockName(int64_t i) const override { return absl::StrCat("block", i); }
  torch::Tensor Loss(const torch::Tensor& output, const torch::Tensor&) override {
    return output.sum();
  }

 private:
  std::vector<torch::Tensor> params_;
};

// One thread copying `bytes` between two buffers: the yardstick of the shared-memory path.
struct MemcpyResult {
  double gbps = 0;          // Median of the runs, bits of payload copied per second.
  double cpu_s_per_gb = 0;  // The copying thread's CPU seconds per GB copied, all runs.
};

// `runs` timed copies after an untimed one that faults both buffers in.
absl::StatusOr<MemcpyResult> MeasureMemcpy(int64_t bytes, int runs) {
  std::vector<char> src(bytes, 1), dst(bytes);
  std::memcpy(dst.data(), src.data(), bytes);
  std::vector<double> gbps;
  const double cpu0 = ThreadCpuSeconds();
  for (int i = 0; i < runs; ++i) {
    src[i] = static_cast<char>(src[i] + 1);  // Each copy differs from the last.
    const absl::Time t0 = absl::Now();
    std::memcpy(dst.data(), src.data(), bytes);
    gbps.push_back(bytes * 8 / absl::ToDoubleSeconds(absl::Now() - t0) / 1e9);
  }
  const double cpu = ThreadCpuSeconds() - cpu0;
  // Read the destination, so that no copy can be left out.
  if (std::memcmp(dst.data(), src.data(), bytes) != 0) {
    return absl::InternalError("memcpy: the copy differs from its source");
  }
  return MemcpyResult{Median(gbps), cpu / (static_cast<double>(bytes) * runs / 1e9)};
}

absl::StatusOr<nlohmann::json> Run() {
  const std::string server_binary = absl::GetFlag(FLAGS_server_binary);
  const double gbps = absl::GetFlag(FLAGS_bandwidth_gbps);
  const int tensors = absl::GetFlag(FLAGS_tensors);
  const int64_t params = absl::GetFlag(FLAGS_params);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  if (server_binary.empty()) return absl::InvalidArgumentError("--server_binary is required");
  if (tensors < 1 || params < tensors) {
    return absl::InvalidArgumentError("--tensors must be >= 1 and <= --params");
  }
  if (absl::GetFlag(FLAGS_shared_memory) && gbps > 0) {
    return absl::InvalidArgumentError(
        "--shared_memory is the colocated path: it takes no --bandwidth_gbps (two machines)");
  }
  if (absl::GetFlag(FLAGS_credit_bytes) < 0) {
    return absl::InvalidArgumentError("--credit_bytes must be >= 0");
  }
  const int servers = absl::GetFlag(FLAGS_servers);
  if (servers < 1 || servers > 8) return absl::InvalidArgumentError("--servers must be 1..8");
  if (servers > 1 && absl::GetFlag(FLAGS_shared_memory)) {
    return absl::InvalidArgumentError("--shared_memory takes one server (--servers=1)");
  }
  if (warmup < 1 || iterations < 1) {
    return absl::InvalidArgumentError("--warmup and --iterations must be >= 1");
  }
  const double iperf3_seconds = absl::GetFlag(FLAGS_iperf3_seconds);
  if (iperf3_seconds < 0 || iperf3_seconds != std::floor(iperf3_seconds)) {
    return absl::InvalidArgumentError(
        "--iperf3_seconds takes whole seconds (iperf3's -t truncates, and -t 0 never ends)");
  }
  const std::string bidir_method = absl::GetFlag(FLAGS_iperf3_bidir_method);
  if (bidir_method != "two_pairs" && bidir_method != "bidir") {
    return absl::InvalidArgumentError(absl::StrCat("--iperf3_bidir_method: \"", bidir_method,
                                                   "\" is not two_pairs or bidir"));
  }
  const int memcpy_runs = absl::GetFlag(FLAGS_memcpy_runs);
  if (memcpy_runs < 1) return absl::InvalidArgumentError("--memcpy_runs must be >= 1");
  P3_ASSIGN_OR_RETURN(const std::string dir,
                      OutputFolder(absl::GetFlag(FLAGS_out_dir), "bench_streaming"));

  // Children are started while this process has one thread (fork safety; the
  // supervisor's contract); the worker's threads come later.
  P3_ASSIGN_OR_RETURN(std::unique_ptr<ProcessSupervisor> sup,
                      ProcessSupervisor::Create(ProcessSupervisor::Options{}));
  P3_ASSIGN_OR_RETURN(BenchmarkLink link, MakeBenchmarkLink(gbps));
  const std::string& host = link.host;
  const std::string& server_ns = link.server_ns;
  const std::string& worker_ns = link.client_ns;
  nlohmann::json result;
  result["build_commit"] = BuildCommit();  // "unstamped" unless built with --config=stamp
  // As this process (the worker) and the server started: glibc.malloc.hugetlb=1 unless
  // the caller set it otherwise (main()).
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  result["glibc_tunables"] = tunables != nullptr ? tunables : "";
  // The name the kernel gave this process (after starting itself again: its own file's).
  P3_ASSIGN_OR_RETURN(const std::string comm, ReadFile("/proc/self/comm"));
  result["process_name"] = std::string(absl::StripAsciiWhitespace(comm));
  const char* experiments = std::getenv("GRPC_EXPERIMENTS");  // set in main()
  result["grpc_experiments"] = experiments != nullptr ? experiments : "";
  result["network"] = gbps > 0 ? "netem" : "loopback";
  result["bandwidth_gbps"] = gbps;
  result["load1_start"] = Load1();
  std::optional<Iperf3Result> iperf3, iperf3_bidir;
  if (iperf3_seconds > 0) {
    Iperf3Options link{.dir = dir,
                       .host = host,
                       .server_ns = server_ns,
                       .client_ns = worker_ns,
                       .seconds = static_cast<int>(iperf3_seconds)};
    P3_ASSIGN_OR_RETURN(iperf3, RunIperf3(sup.get(), link));
    if (absl::GetFlag(FLAGS_iperf3_bidir)) {
      link.bidir = true;
      link.two_pairs = bidir_method == "two_pairs";
      link.name = "iperf3_bidir";
      P3_ASSIGN_OR_RETURN(iperf3_bidir, RunIperf3(sup.get(), link));
    }
  }
  const bool shared = absl::GetFlag(FLAGS_shared_memory);
  std::optional<MemcpyResult> copy;
  // Before the server starts, so that nothing of the run competes with it; the buffers
  // are freed before the run.
  const int64_t memcpy_bytes = std::max<int64_t>(params / tensors * tensors * 4, kMinMemcpyBytes);
  if (shared) {
    P3_ASSIGN_OR_RETURN(copy, MeasureMemcpy(memcpy_bytes, memcpy_runs));
  }

  // The real servers, with the optimizer reduced to plain SGD (no momentum, no decay),
  // all on the server's machine: each listens on a port of its own.
  const std::string config = dir + "/server.textproto";
  P3_RETURN_IF_ERROR(WriteFileAtomically(
      config, absl::StrCat("name: \"bench_streaming\"\nmode: \"p3\"\n",
                           "cluster { workers: 1 servers: ", servers, " host: \"", host, "\" }\n",
                           "optimizer { name: \"sgd\" lr: 0.001 momentum: 0 weight_decay: 0 }\n",
                           "scheduling { slice_params: ", absl::GetFlag(FLAGS_slice_params),
                           " credit_bytes: ", absl::GetFlag(FLAGS_credit_bytes),
                           " sized_reads: ", absl::GetFlag(FLAGS_sized_reads) ? "true" : "false",
                           " }\n",
                           "output_dir: \"", dir, "\"\n")));
  sup->WatchFolder(dir);
  std::vector<int> server_ids;
  std::vector<pid_t> server_pids;
  std::vector<std::string> server_logs, addresses;
  for (int s = 0; s < servers; ++s) {
    // Server 0 keeps the single server's file names.
    const std::string suffix = s == 0 ? "" : absl::StrCat("_", s);
    const std::string port_file = dir + "/server" + suffix + ".port";
    server_logs.push_back(dir + "/server" + suffix + ".log");
    std::filesystem::remove(port_file);
    P3_ASSIGN_OR_RETURN(
        int id, sup->Start(ProcessSpec{.argv = {server_binary, "--config=" + config,
                                                absl::StrCat("--server_index=", s),
                                                "--port_file=" + port_file},
                                       .log_path = server_logs.back(),
                                       .ns_path = server_ns,
                                       .label = absl::StrCat("server", suffix)}));
    P3_RETURN_IF_ERROR(
        WaitForText(sup.get(), id, server_logs.back(), "listening on port", absl::Seconds(30)));
    P3_ASSIGN_OR_RETURN(const std::string port_text, ReadFile(port_file));
    addresses.push_back(absl::StrCat(host, ":", absl::StripAsciiWhitespace(port_text)));
    server_ids.push_back(id);
    server_pids.push_back(sup->process(id).pid);
  }
  // Every server's CPU and threads' context switches, summed.
  auto servers_cpu = [&]() -> absl::StatusOr<double> {
    double sum = 0;
    for (pid_t pid : server_pids) {
      P3_ASSIGN_OR_RETURN(double one, ProcessCpuSeconds(pid));
      sum += one;
    }
    return sum;
  };
  auto servers_switches = [&]() -> absl::StatusOr<ContextSwitches> {
    ContextSwitches sum;
    for (pid_t pid : server_pids) {
      P3_ASSIGN_OR_RETURN(ContextSwitches one, ThreadContextSwitches(pid));
      sum = sum + one;
    }
    return sum;
  };

  // This process becomes the worker's machine: setns() applies to the calling thread,
  // and every thread started later (gRPC's, the connections') inherits it.
  if (!worker_ns.empty()) {
    if (int err = EnterNamespace(worker_ns.c_str()); err != 0) {
      return absl::InternalError(absl::StrCat("setns ", worker_ns, ": ", strerror(err)));
    }
  }

  torch::set_num_threads(1);
  const int64_t per_tensor = params / tensors;
  auto model = std::make_shared<StreamingModel>(tensors, per_tensor);
  // Declared before the worker, which records into it until it is destroyed.
  const std::string trace_path = absl::GetFlag(FLAGS_trace_json);
  TraceRecorder trace({.enabled = !trace_path.empty(), .process_name = "worker 0", .pid = 100});
  WorkerOptions options;
  options.trace = &trace;
  options.servers = addresses;
  options.slice_params = absl::GetFlag(FLAGS_slice_params);
  options.credit_bytes = absl::GetFlag(FLAGS_credit_bytes);
  if (shared) options.shared_memory_servers = {0};
  P3_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, Worker::Create(options, model));
  const torch::Tensor input = torch::zeros({1});
  const torch::Tensor target;
  auto iterate = [&]() -> absl::Status {
    P3_ASSIGN_OR_RETURN(torch::Tensor out, worker->Forward(input));
    return worker->Backward(model->Loss(out, target));
  };
  for (int i = 0; i < warmup; ++i) P3_RETURN_IF_ERROR(iterate());
  P3_RETURN_IF_ERROR(worker->Sync());

  const WorkerStats stats0 = worker->stats();
  const double cpu0 = SelfCpuSeconds(), thread0 = ThreadCpuSeconds();
  P3_ASSIGN_OR_RETURN(double server0, servers_cpu());
  P3_ASSIGN_OR_RETURN(ContextSwitches worker_sw0, ThreadContextSwitches(getpid()));
  P3_ASSIGN_OR_RETURN(ContextSwitches server_sw0, servers_switches());
  P3_ASSIGN_OR_RETURN(HostCpu host0, ReadHostCpu());
  const absl::Time t0 = absl::Now();
  for (int i = 0; i < iterations; ++i) P3_RETURN_IF_ERROR(iterate());
  P3_RETURN_IF_ERROR(worker->Sync());
  const absl::Time t1 = absl::Now();
  const double cpu1 = SelfCpuSeconds(), thread1 = ThreadCpuSeconds();
  P3_ASSIGN_OR_RETURN(double server1, servers_cpu());
  P3_ASSIGN_OR_RETURN(ContextSwitches worker_sw1, ThreadContextSwitches(getpid()));
  P3_ASSIGN_OR_RETURN(ContextSwitches server_sw1, servers_switches());
  P3_ASSIGN_OR_RETURN(HostCpu host1, ReadHostCpu());
  const WorkerStats stats1 = worker->stats();

  P3_RETURN_IF_ERROR(worker->Finish());
  worker.reset();
  if (!trace_path.empty()) P3_RETURN_IF_ERROR(trace.WriteJson(trace_path));
  for (int s = 0; s < servers; ++s) {
    P3_RETURN_IF_ERROR(WaitForExit(sup.get(), server_ids[s], absl::StrCat("server ", s),
                                   server_logs[s], absl::Seconds(30)));
  }
  if (link.net != nullptr) P3_RETURN_IF_ERROR(link.net->Destroy());

  const double seconds = absl::ToDoubleSeconds(t1 - t0);
  // Through shared memory the values do not cross the stream: bytes_shared counts both
  // directions, half each.
  const int64_t through_shm = stats1.bytes_shared - stats0.bytes_shared;
  const int64_t sent = shared ? through_shm / 2 : stats1.bytes_sent - stats0.bytes_sent;
  const int64_t received =
      shared ? through_shm - through_shm / 2 : stats1.bytes_received - stats0.bytes_received;
  result["shared_memory"] = shared;
  const double worker_cpu = cpu1 - cpu0, server_cpu = server1 - server0;
  result["params"] = per_tensor * tensors;
  result["tensors"] = tensors;
  result["slice_params"] = absl::GetFlag(FLAGS_slice_params);
  result["credit_bytes"] = absl::GetFlag(FLAGS_credit_bytes);
  result["warmup"] = warmup;
  result["iterations"] = iterations;
  result["seconds"] = seconds;
  // The measured window on the trace's clock (microseconds of the wall clock).
  result["window_start_us"] = absl::ToUnixMicros(t0);
  result["window_end_us"] = absl::ToUnixMicros(t1);
  result["bytes_sent"] = sent;
  result["bytes_received"] = received;
  // Each direction carries P x 4 bytes per iteration; iperf3 measures one direction.
  result["goodput_up_gbps"] = sent * 8 / seconds / 1e9;
  result["goodput_down_gbps"] = received * 8 / seconds / 1e9;
  result["worker_cpu_s"] = worker_cpu;
  result["worker_training_thread_cpu_s"] = thread1 - thread0;
  result["server_cpu_s"] = server_cpu;
  result["servers"] = servers;
  const ContextSwitches worker_sw = worker_sw1 - worker_sw0, server_sw = server_sw1 - server_sw0;
  result["worker_voluntary_switches"] = worker_sw.voluntary;
  result["worker_involuntary_switches"] = worker_sw.involuntary;
  result["server_voluntary_switches"] = server_sw.voluntary;
  result["server_involuntary_switches"] = server_sw.involuntary;
  {
    // The worker's peak resident memory (its model's parameters, the flat buffers, gRPC's).
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    result["worker_max_rss_mb"] = ru.ru_maxrss / 1024.0;
  }
  // GB of payload across, both directions (the header: how a GB is counted).
  const double gb_moved = (sent + received) / 1e9;
  result["cpu_s_per_gb"] = (worker_cpu + server_cpu) / gb_moved;
  // Everything the host's cores did in the window, per GB: what a host whose cores are
  // all busy (the cluster's) pays, where the kernel's forwarding cannot use idle time.
  const double host_busy_s = TicksToSeconds(host1.busy_ticks - host0.busy_ticks);
  result["host_busy_s"] = host_busy_s;
  result["host_softirq_s"] = TicksToSeconds(host1.softirq_ticks - host0.softirq_ticks);
  result["host_cpu_s_per_gb"] = host_busy_s / gb_moved;
  result["load1_end"] = Load1();
  const double goodput = sent * 8 / seconds / 1e9;
  if (iperf3.has_value()) {
    // Per GB of payload across the link as for us: iperf3's bytes go one way only.
    const double gb = iperf3->bytes / 1e9;
    const double iperf3_busy_s = TicksToSeconds(iperf3->host.busy_ticks);
    const double iperf3_host_per_gb = iperf3->host_cpu_s_per_gb();
    result["iperf3_gbps"] = iperf3->gbps;
    result["ratio"] = goodput / iperf3->gbps;
    result["iperf3_bytes"] = iperf3->bytes;
    result["iperf3_host_busy_s"] = iperf3_busy_s;
    result["iperf3_softirq_s"] = TicksToSeconds(iperf3->host.softirq_ticks);
    result["iperf3_host_cpu_s_per_gb"] = iperf3_host_per_gb;
    result["iperf3_sender_cpu_percent"] = iperf3->sender_cpu_percent;
    result["iperf3_receiver_cpu_percent"] = iperf3->receiver_cpu_percent;
    // iperf3's two processes, the counterpart of cpu_s_per_gb (worker + server).
    result["iperf3_cpu_s_per_gb"] =
        (iperf3->sender_cpu_percent + iperf3->receiver_cpu_percent) / 100 * iperf3->seconds / gb;
    // No ratio where the host's counters did not move in iperf3's run (1/100 s ticks).
    if (iperf3_host_per_gb > 0) {
      result["cpu_ratio_to_iperf3"] = host_busy_s / gb_moved / iperf3_host_per_gb;
    }
  }
  if (iperf3_bidir.has_value()) {
    const double gb = iperf3_bidir->total_bytes() / 1e9;
    const double busy_s = TicksToSeconds(iperf3_bidir->host.busy_ticks);
    const double bidir_gbps = (iperf3_bidir->gbps + iperf3_bidir->reverse_gbps) / 2;
    result["iperf3_bidir_method"] = bidir_method;
    result["iperf3_bidir_gbps"] = bidir_gbps;
    result["iperf3_bidir_up_gbps"] = iperf3_bidir->gbps;
    result["iperf3_bidir_down_gbps"] = iperf3_bidir->reverse_gbps;
    result["iperf3_bidir_bytes"] = iperf3_bidir->total_bytes();
    result["iperf3_bidir_host_busy_s"] = busy_s;
    result["iperf3_bidir_softirq_s"] = TicksToSeconds(iperf3_bidir->host.softirq_ticks);
    result["iperf3_bidir_host_cpu_s_per_gb"] = iperf3_bidir->host_cpu_s_per_gb();
    result["iperf3_bidir_cpu_s_per_gb"] =
        (iperf3_bidir->sender_cpu_percent + iperf3_bidir->receiver_cpu_percent) / 100 *
        iperf3_bidir->seconds / gb;
    result["ratio_to_iperf3_bidir"] = goodput / bidir_gbps;
    if (busy_s > 0) {
      result["cpu_ratio_to_iperf3_bidir"] =
          host_busy_s / gb_moved / iperf3_bidir->host_cpu_s_per_gb();
    }
  }
  if (copy.has_value()) {
    result["memcpy_bytes"] = memcpy_bytes;
    result["memcpy_gbps"] = copy->gbps;
    result["memcpy_cpu_s_per_gb"] = copy->cpu_s_per_gb;
    result["goodput_to_memcpy"] = goodput / copy->gbps;
  }
  return result;
}

}  // namespace
}  // namespace p3::tools

int main(int argc, char** argv) {
  // This process is the worker: its heap in huge pages, as the launcher's workers' are, and
  // the server's too (it inherits the environment). glibc reads the tunable only when a
  // process starts, so the benchmark starts itself again, once, with it; a GLIBC_TUNABLES
  // that already sets glibc.malloc.hugetlb (=0: off) is kept (p3/base/allocator.h).
  if (const char* tunables = std::getenv("GLIBC_TUNABLES");
      tunables == nullptr || p3::TunablesWithHugePageHeap(tunables) != tunables) {
    // By its own path, not /proc/self/exe: the kernel names the process after the file
    // executed, and perf (streaming_cpu_breakdown.py) and ps look for "bench_streaming".
    char self[4096];
    const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (length > 0) self[length] = '\0';
    if (p3::RequestHugePageHeapForChildren().ok()) {
      execv(length > 0 ? self : "/proc/self/exe", argv);
    }
    // execv returned: go on with the heap as it is.
  }
  // As p3_worker (worker/p3_worker_main.cc) and p3_server do, before any thread: one malloc
  // arena (p3/base/allocator.h) and no lock-order checks (proto/program.h), so that the
  // worker measured here is the launcher's. Until 2026-12-06 it had per-thread arenas and
  // the checks (docs/results/streaming/streaming.md, "The benchmark's worker as p3_worker").
  p3::Program program("bench_streaming", argc, argv,
                      {.allocator = p3::AllocatorOptions{.one_arena = true},
                       .skip_lock_order_checks = true});
  // Before gRPC's first use; the server inherits it (p3/base/grpc_experiments.h).
  program.RequestSizedReads(absl::GetFlag(FLAGS_sized_reads));
  absl::StatusOr<nlohmann::json> result = p3::tools::Run();
  if (!result.ok()) return program.Fail(1, result.status().ToString());
  const std::string text = result->dump();
  std::cout << text << std::endl;
  if (absl::Status s = p3::WriteRequestedFile(absl::GetFlag(FLAGS_result_json), text + "\n");
      !s.ok()) {
    return program.Fail(1, s.ToString());
  }
  return 0;
}
