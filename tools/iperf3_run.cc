#include "tools/iperf3_run.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"

namespace p3::tools {

using launcher::ProcessSpec;
using launcher::ProcessSupervisor;

HostCpu Elapsed(const HostCpu& from, const HostCpu& to) {
  return HostCpu{to.busy_ticks - from.busy_ticks, to.softirq_ticks - from.softirq_ticks};
}

double TicksToSeconds(int64_t ticks) {
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double Iperf3Result::host_cpu_s_per_gb() const {
  const double busy_s = TicksToSeconds(host.busy_ticks);
  const int64_t moved = total_bytes();
  return busy_s > 0 && moved > 0 ? busy_s / (static_cast<double>(moved) / 1e9) : 0;
}

absl::StatusOr<HostCpu> ReadHostCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") {
    return absl::InternalError("malformed /proc/stat");
  }
  return HostCpu{user + nice + system + irq + softirq, irq + softirq};
}

absl::Status WaitForExit(ProcessSupervisor* sup, int id, const std::string& what,
                         const std::string& log, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (sup->process(id).running && absl::Now() < deadline) {
    sup->WaitForEvent(deadline - absl::Now());
    if (sup->interrupt_signal() != 0) return sup->InterruptedError();
  }
  if (sup->process(id).running) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " did not exit within ", absl::FormatDuration(timeout), "; log: ", log));
  }
  if (!sup->process(id).exited_cleanly()) {
    return absl::InternalError(
        absl::StrCat(what, " ", launcher::DescribeWaitStatus(sup->process(id).wait_status), ":\n",
                     launcher::TailOfFile(log, 10)));
  }
  return absl::OkStatus();
}

absl::Status WaitForText(ProcessSupervisor* sup, int id, const std::string& path,
                         const std::string& text, absl::Duration timeout) {
  sup->WatchFile(path);
  const absl::Time deadline = absl::Now() + timeout;
  // A log not there yet reads as empty.
  while (ReadFile(path).value_or("").find(text) == std::string::npos) {
    if (!sup->process(id).running) {
      return absl::InternalError(absl::StrCat(path, ": the process ended before '", text, "':\n",
                                              launcher::TailOfFile(path, 10)));
    }
    if (absl::Now() >= deadline)
      return absl::DeadlineExceededError(absl::StrCat(path, ": no '", text, "'"));
    sup->WaitForEvent(absl::Milliseconds(200));
    if (sup->interrupt_signal() != 0) return sup->InterruptedError();
  }
  return absl::OkStatus();
}

namespace {

// A port that was free a moment ago (for iperf3, which cannot report the one it bound).
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  if (port < 0) return absl::InternalError("no free port");
  return port;
}

}  // namespace

absl::StatusOr<Iperf3Result> ParseIperf3Report(const std::string& json, bool bidir) {
  try {
    const nlohmann::json j = nlohmann::json::parse(json);
    const nlohmann::json& end = j.at("end");
    const nlohmann::json& received = end.at("sum_received");
    const nlohmann::json& cpu = end.at("cpu_utilization_percent");
    Iperf3Result r;
    r.bidir = bidir;
    r.gbps = received.at("bits_per_second").get<double>() / 1e9;
    r.bytes = received.at("bytes").get<int64_t>();
    r.seconds = received.at("seconds").get<double>();
    r.sender_cpu_percent = cpu.at("host_total").get<double>();
    r.receiver_cpu_percent = cpu.at("remote_total").get<double>();
    if (r.bytes <= 0) return absl::InternalError("no bytes received");
    if (bidir) {
      if (!end.contains("sum_received_bidir_reverse")) {
        return absl::InternalError(
            "no end.sum_received_bidir_reverse: not an iperf3 --bidir report");
      }
      const nlohmann::json& reverse = end.at("sum_received_bidir_reverse");
      r.reverse_gbps = reverse.at("bits_per_second").get<double>() / 1e9;
      r.reverse_bytes = reverse.at("bytes").get<int64_t>();
      if (r.reverse_bytes <= 0) return absl::InternalError("no bytes received in reverse");
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return absl::InternalError(e.what());
  }
}

namespace {

// The client's report or the server's log of the pair `name`, in options.dir.
std::string ClientReport(const Iperf3Options& options, const std::string& name) {
  return absl::StrCat(options.dir, "/", name, "_client.json");
}
std::string ServerLog(const Iperf3Options& options, const std::string& name) {
  return absl::StrCat(options.dir, "/", name, "_server.log");
}

// One iperf3 server (-1: one test) listening in `ns`, on a free port; returns its id and
// port.
absl::StatusOr<std::pair<int, int>> StartServer(ProcessSupervisor* sup,
                                                const Iperf3Options& options,
                                                const std::string& name) {
  P3_ASSIGN_OR_RETURN(int port, FreePort());
  const std::string log = ServerLog(options, name);
  P3_ASSIGN_OR_RETURN(int server,
                      sup->Start(ProcessSpec{.argv = {"iperf3", "-s", "-1", "--forceflush", "-B",
                                                      options.host, "-p", absl::StrCat(port)},
                                             .log_path = log,
                                             .ns_path = options.server_ns,
                                             .label = name + " server"}));
  P3_RETURN_IF_ERROR(WaitForText(sup, server, log, "listening", absl::Seconds(10)));
  return std::make_pair(server, port);
}

absl::StatusOr<int> StartClient(ProcessSupervisor* sup, const Iperf3Options& options,
                                const std::string& name, int port,
                                const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      "iperf3", "-c", options.host, "-p", absl::StrCat(port), "-t", absl::StrCat(options.seconds),
      "-J"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return sup->Start(ProcessSpec{.argv = argv,
                                .log_path = ClientReport(options, name),
                                .ns_path = options.client_ns,
                                .label = name + " client"});
}

// The client's report of a finished pair, parsed.
absl::StatusOr<Iperf3Result> Finish(ProcessSupervisor* sup, const Iperf3Options& options,
                                    const std::string& name, int server, bool bidir) {
  const std::string client_log = ClientReport(options, name);
  P3_RETURN_IF_ERROR(
      WaitForExit(sup, server, name + " server", ServerLog(options, name), absl::Seconds(10)));
  P3_ASSIGN_OR_RETURN(const std::string report, ReadFile(client_log));
  absl::StatusOr<Iperf3Result> r = ParseIperf3Report(report, bidir);
  if (!r.ok()) return absl::InternalError(absl::StrCat(client_log, ": ", r.status().message()));
  return r;
}

}  // namespace

absl::StatusOr<Iperf3Result> RunIperf3(ProcessSupervisor* sup, const Iperf3Options& options) {
  if (options.dir.empty() || options.host.empty()) {
    return absl::InvalidArgumentError("RunIperf3: dir and host are required");
  }
  if (options.seconds < 1) {
    return absl::InvalidArgumentError("RunIperf3: seconds must be >= 1 (-t 0 never ends)");
  }
  const bool pairs = options.bidir && options.two_pairs;
  const std::string reverse_name = options.name + "_reverse";
  P3_ASSIGN_OR_RETURN(auto forward, StartServer(sup, options, options.name));
  std::pair<int, int> reverse{-1, -1};
  if (pairs) {
    P3_ASSIGN_OR_RETURN(reverse, StartServer(sup, options, reverse_name));
  }
  const absl::Duration limit = absl::Seconds(options.seconds + 20);
  P3_ASSIGN_OR_RETURN(HostCpu host0, ReadHostCpu());
  std::vector<std::string> extra;
  if (options.bidir && !pairs) extra.push_back("--bidir");
  P3_ASSIGN_OR_RETURN(int client, StartClient(sup, options, options.name, forward.second, extra));
  int reverse_client = -1;
  if (pairs) {
    P3_ASSIGN_OR_RETURN(reverse_client,
                        StartClient(sup, options, reverse_name, reverse.second, {"-R"}));
  }
  P3_RETURN_IF_ERROR(WaitForExit(sup, client, options.name + " client",
                                 ClientReport(options, options.name), limit));
  if (pairs) {
    P3_RETURN_IF_ERROR(WaitForExit(sup, reverse_client, reverse_name + " client",
                                   ClientReport(options, reverse_name), limit));
  }
  P3_ASSIGN_OR_RETURN(HostCpu host1, ReadHostCpu());
  P3_ASSIGN_OR_RETURN(Iperf3Result r,
                      Finish(sup, options, options.name, forward.first, options.bidir && !pairs));
  if (pairs) {
    // -R: the reverse client receives; its report's sum_received is the server -> client
    // direction, host_total its receiver's CPU and remote_total its sender's.
    P3_ASSIGN_OR_RETURN(Iperf3Result back,
                        Finish(sup, options, reverse_name, reverse.first, /*bidir=*/false));
    r.bidir = true;
    r.reverse_gbps = back.gbps;
    r.reverse_bytes = back.bytes;
    r.sender_cpu_percent += back.receiver_cpu_percent;
    r.receiver_cpu_percent += back.sender_cpu_percent;
  }
  r.host = Elapsed(host0, host1);
  return r;
}

}  // namespace p3::tools
