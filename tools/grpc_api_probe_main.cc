// grpc_api_probe: P3's stream pattern on bare gRPC, with each of its two C++ APIs: what
// the transport alone costs on a link, to set beside P3's data path (bench_streaming) and
// iperf3 on the same link, and what gRPC's callback API would save P3's stream loops
// (docs/results/streaming/streaming.md, "gRPC's two APIs on P3's pattern").
//
// Both P3 processes run each stream on gRPC's synchronous API: a reader thread blocked in
// Read() and a writer thread blocked in Write() on one call, each of which waits in the
// call's own completion queue, so that every completion the other thread's operation
// needs is a wake-up between threads (streaming.md, "Who wakes whom on a 5 Gbit/s link").
// The callback API runs the reactions on gRPC's own threads instead. The two ends
// (grpc_api_probe_ends.h) move P3's pattern with either API and nothing else: the client
// writes a worker's slices, one write in flight, in iterations; the server writes each
// message back as it comes, as one worker's server does its values.
// The window starts once one message has gone there and back, and ends when the last
// has come back. In it: wall time, both processes' CPU (utime + stime, every thread), the
// host's busy and softirq time (/proc/stat: the emulated link's forwarding), and both
// processes' context switches.
//
//   grpc_api_probe                                         # loopback, 5 rounds each API
//   grpc_api_probe --bandwidth_gbps=5 --csv=/tmp/probe.csv # a 5 Gbit/s link (root)
//
// The driver (the default role) builds the network as bench_streaming does
// (tools/launcher/netem.h), then for each round starts the server and the client, each
// this binary again (--role=server, --role=client) on its machine, the APIs alternating
// (the first one changes from round to round). Rows go to --csv (appended; the header when
// the file is new), the medians to stdout. Reads are sized to the message in both
// processes, as P3's are (p3/base/grpc_experiments.h), unless GRPC_EXPERIMENTS is set.
// Exit status 0, or 1 with the reason on stderr.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "p3/base/build_commit.h"
#include "p3/base/file_util.h"
#include "p3/base/stats.h"
#include "p3/base/status_macros.h"
#include "proto/program.h"
#include "tools/grpc_api_probe_ends.h"
#include "tools/iperf3_run.h"
#include "tools/launcher/netem.h"
#include "tools/launcher/process_supervisor.h"

ABSL_FLAG(std::string, role, "driver", "driver, server or client (the last two: the driver's)");
ABSL_FLAG(std::string, apis, "sync,callback",
          "driver: the APIs compared, in the first round's order; an API is sync, callback, or "
          "<client's>/<server's> (callback/sync: the client on the callback API)");
ABSL_FLAG(std::string, api, "", "server and client: sync or callback");
ABSL_FLAG(double, bandwidth_gbps, 0,
          "driver: emulated link per machine and direction (root); 0: loopback");
ABSL_FLAG(int64_t, message_bytes, 160'000, "bytes a message (160,000: a 40,000-value slice)");
ABSL_FLAG(int64_t, megabytes, 2000, "MB each way in the window");
ABSL_FLAG(int64_t, iteration_megabytes, 100,
          "MB an iteration: the next iteration's messages go once the last one's are back "
          "(100: bench_streaming's 25 M parameters)");
ABSL_FLAG(int, runs, 5, "driver: rounds, each API once per round");
ABSL_FLAG(int, iperf3_seconds, 0,
          "driver: iperf3 one way on the same link first in each round, whole seconds; its "
          "rate, goodput ÷ it, and its host CPU s per GB (as bench_streaming's: per GB one way, "
          "ours per GB across both) and ours ÷ it go into the round's rows; 0: none");
ABSL_FLAG(std::string, csv, "", "driver: append every run here");
ABSL_FLAG(std::string, out_dir, "", "driver: logs and results; default: a temporary folder");
ABSL_FLAG(std::string, port_file, "", "server: write the port here");
ABSL_FLAG(std::string, target, "", "client: host:port of the server");
ABSL_FLAG(int, server_pid, 0, "client: the server's process, for its CPU and switches");
ABSL_FLAG(std::string, result_json, "", "client: write the run's figures here");

namespace p3::tools {
namespace {

using launcher::ProcessSpec;
using launcher::ProcessSupervisor;
// ---- driver ----------------------------------------------------------------------------

const std::vector<std::string> kColumns = {
    "date",          "commit",         "rate_gbps",   "run",
    "api",           "message_bytes",  "messages", "iteration_messages",    "seconds",
    "goodput_gbps",  "client_cpu_s",   "server_cpu_s", "cpu_s_per_gb",
    "host_busy_s",   "host_softirq_s", "host_cpu_s_per_gb",
    "client_voluntary_switches", "server_voluntary_switches", "voluntary_switches_per_message",
    "grpc_experiments", "iperf3_gbps", "ratio", "iperf3_host_cpu_s_per_gb", "cpu_ratio_to_iperf3"};

// A CSV cell: quoted where the text holds a comma, a quote or a line break
// (grpc_experiments lists two).
std::string Cell(const nlohmann::json& v) {
  std::string text = v.is_string()         ? v.get<std::string>()
                     : v.is_number_float() ? absl::StrCat(v.get<double>())
                                           : v.dump();
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

// "sync", "callback", or "<client's>/<server's>" (e.g. "callback/sync"): the two ends' APIs.
absl::StatusOr<std::pair<std::string, std::string>> ApiPair(const std::string& api) {
  const std::vector<std::string> ends = absl::StrSplit(api, '/');
  if (ends.size() > 2) return absl::InvalidArgumentError(api);
  for (const std::string& end : ends) {
    if (end != "sync" && end != "callback") return absl::InvalidArgumentError(api);
  }
  return std::make_pair(ends.front(), ends.back());
}

absl::Status RunDriver(const char* self) {
  const double gbps = absl::GetFlag(FLAGS_bandwidth_gbps);
  const std::vector<std::string> apis = absl::StrSplit(absl::GetFlag(FLAGS_apis), ',');
  for (const std::string& api : apis) {
    if (!ApiPair(api).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--apis: unknown API \"", api, "\""));
    }
  }
  P3_ASSIGN_OR_RETURN(const std::string dir,
                      OutputFolder(absl::GetFlag(FLAGS_out_dir), "grpc_api_probe"));
  P3_ASSIGN_OR_RETURN(std::unique_ptr<ProcessSupervisor> sup,
                      ProcessSupervisor::Create(ProcessSupervisor::Options{}));
  P3_ASSIGN_OR_RETURN(BenchmarkLink link, MakeBenchmarkLink(gbps));
  const std::string& host = link.host;
  const std::string& server_ns = link.server_ns;
  const std::string& client_ns = link.client_ns;
  const std::string csv = absl::GetFlag(FLAGS_csv);
  const bool header = !csv.empty() && !std::filesystem::exists(csv);
  std::ofstream out;
  if (!csv.empty()) out.open(csv, std::ios::app);
  if (header) out << absl::StrJoin(kColumns, ",") << "\n";
  const char* experiments = std::getenv("GRPC_EXPERIMENTS");
  const std::string date = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  std::map<std::string, std::vector<double>> goodput, cpu, host_cpu, switches, ratio;
  const std::string size_flag =
      absl::StrCat("--message_bytes=", absl::GetFlag(FLAGS_message_bytes));
  const std::string mb_flag = absl::StrCat("--megabytes=", absl::GetFlag(FLAGS_megabytes));
  const std::string iteration_flag =
      absl::StrCat("--iteration_megabytes=", absl::GetFlag(FLAGS_iteration_megabytes));
  const int iperf3_seconds = absl::GetFlag(FLAGS_iperf3_seconds);
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    std::optional<Iperf3Result> iperf3;
    if (iperf3_seconds > 0) {
      P3_ASSIGN_OR_RETURN(const Iperf3Result measured,
                          RunIperf3(sup.get(), {.dir = dir,
                                                .host = host,
                                                .server_ns = server_ns,
                                                .client_ns = client_ns,
                                                .seconds = iperf3_seconds,
                                                .name = absl::StrCat("iperf3_", run)}));
      iperf3 = measured;
    }
    for (size_t k = 0; k < apis.size(); ++k) {
      const std::string& api = apis[(k + run) % apis.size()];  // the first one alternates
      const std::string tag = absl::StrCat(absl::StrReplaceAll(api, {{"/", "-"}}), "_", run);
      const auto [client_api, server_api] = *ApiPair(api);
      const std::string port_file = absl::StrCat(dir, "/port_", tag);
      const std::string server_log = absl::StrCat(dir, "/server_", tag, ".log");
      const std::string client_log = absl::StrCat(dir, "/client_", tag, ".log");
      const std::string result = absl::StrCat(dir, "/result_", tag, ".json");
      P3_ASSIGN_OR_RETURN(
          const int server_id,
          sup->Start(ProcessSpec{
              .argv = {self, "--role=server", "--api=" + server_api, "--port_file=" + port_file},
              .log_path = server_log,
              .ns_path = server_ns,
              .label = "server"}));
      P3_RETURN_IF_ERROR(
          WaitForText(sup.get(), server_id, server_log, "listening on port", absl::Seconds(30)));
      P3_ASSIGN_OR_RETURN(const std::string port, ReadFile(port_file));
      const pid_t server_pid = sup->process(server_id).pid;
      P3_ASSIGN_OR_RETURN(
          const int client_id,
          sup->Start(ProcessSpec{
              .argv = {self, "--role=client", "--api=" + client_api,
                       absl::StrCat("--target=", host, ":", absl::StripAsciiWhitespace(port)),
                       absl::StrCat("--server_pid=", server_pid), "--result_json=" + result,
                       size_flag, mb_flag, iteration_flag},
              .log_path = client_log,
              .ns_path = client_ns,
              .label = "client"}));
      P3_RETURN_IF_ERROR(WaitForExit(sup.get(), client_id, "client", client_log, absl::Minutes(5)));
      P3_RETURN_IF_ERROR(
          WaitForExit(sup.get(), server_id, "server", server_log, absl::Seconds(30)));
      P3_ASSIGN_OR_RETURN(const std::string text, ReadFile(result));
      nlohmann::json r = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (r.is_discarded()) return absl::InternalError(absl::StrCat(result, " is not JSON"));
      r["date"] = date;
      r["commit"] = BuildCommit();
      r["rate_gbps"] = gbps;
      r["run"] = run;
      r["api"] = api;
      if (iperf3.has_value()) {
        r["iperf3_gbps"] = iperf3->gbps;
        r["ratio"] = r["goodput_gbps"].get<double>() / iperf3->gbps;
        // As bench_streaming: iperf3's per GB it moved one way, against ours per GB across
        // both directions; none where no tick moved.
        const double per_gb = iperf3->host_cpu_s_per_gb();
        if (per_gb > 0) {
          r["iperf3_host_cpu_s_per_gb"] = per_gb;
          r["cpu_ratio_to_iperf3"] = r["host_cpu_s_per_gb"].get<double>() / per_gb;
        }
      }
      r["grpc_experiments"] = experiments != nullptr ? experiments : "";
      std::vector<std::string> cells;
      for (const std::string& c : kColumns) cells.push_back(r.contains(c) ? Cell(r[c]) : "");
      if (out.is_open()) out << absl::StrJoin(cells, ",") << "\n" << std::flush;
      std::cerr << "run " << run << " " << api << ": " << r["goodput_gbps"].get<double>()
                << " Gbit/s, " << r["host_cpu_s_per_gb"].get<double>() << " host CPU s/GB"
                << std::endl;
      goodput[api].push_back(r["goodput_gbps"].get<double>());
      cpu[api].push_back(r["cpu_s_per_gb"].get<double>());
      host_cpu[api].push_back(r["host_cpu_s_per_gb"].get<double>());
      switches[api].push_back(r["voluntary_switches_per_message"].get<double>());
      if (iperf3.has_value()) ratio[api].push_back(r["ratio"].get<double>());
    }
  }
  if (link.net != nullptr) P3_RETURN_IF_ERROR(link.net->Destroy());
  const bool with_iperf3 = iperf3_seconds > 0;
  std::cout << "| API | goodput Gbit/s | " << (with_iperf3 ? "goodput ÷ iperf3 | " : "")
            << "CPU s/GB (both processes) | host CPU s/GB | voluntary switches a message |\n"
            << "|---|---:|" << (with_iperf3 ? "---:|" : "") << "---:|---:|---:|\n";
  for (const std::string& api : apis) {
    std::cout << "| " << api << " | " << Median(goodput[api]) << " | ";
    if (with_iperf3) std::cout << Median(ratio[api]) << " | ";
    std::cout << Median(cpu[api]) << " | " << Median(host_cpu[api]) << " | "
              << Median(switches[api]) << " |\n";
  }
  std::cout << "medians of " << absl::GetFlag(FLAGS_runs) << " runs each, "
            << (gbps > 0 ? absl::StrCat(gbps, " Gbit/s") : std::string("loopback")) << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace p3::tools

int main(int argc, char** argv) {
  p3::Program program("grpc_api_probe", argc, argv,
                      {.allocator = p3::AllocatorOptions{.one_arena = true},
                       .skip_lock_order_checks = true});
  program.RequestSizedReads(true);
  const std::string role = absl::GetFlag(FLAGS_role);
  const std::string api = absl::GetFlag(FLAGS_api);
  if (role != "driver" && api != "sync" && api != "callback") {
    return program.Fail(2, "--api must be sync or callback");
  }
  if (role == "server") {
    absl::Status s = p3::tools::RunEchoServer(api == "callback", absl::GetFlag(FLAGS_port_file));
    return s.ok() ? 0 : program.Fail(1, s.ToString());
  }
  if (role == "client") {
    absl::StatusOr<nlohmann::json> r = p3::tools::RunEchoClient(
        {.target = absl::GetFlag(FLAGS_target),
         .callback = api == "callback",
         .message_bytes = absl::GetFlag(FLAGS_message_bytes),
         .megabytes = absl::GetFlag(FLAGS_megabytes),
         .iteration_megabytes = absl::GetFlag(FLAGS_iteration_megabytes),
         .server_pid = absl::GetFlag(FLAGS_server_pid)});
    if (!r.ok()) return program.Fail(1, r.status().ToString());
    absl::Status s = p3::WriteFileAtomically(absl::GetFlag(FLAGS_result_json), r->dump() + "\n");
    return s.ok() ? 0 : program.Fail(1, s.ToString());
  }
  if (role != "driver") return program.Fail(2, "--role must be driver, server or client");
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) return program.Fail(1, "cannot read /proc/self/exe");
  self[length] = '\0';
  absl::Status s = p3::tools::RunDriver(self);
  return s.ok() ? 0 : program.Fail(1, s.ToString());
}
