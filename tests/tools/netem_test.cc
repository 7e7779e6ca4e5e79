// Tests of tools/launcher/netem.h. The command lines, addresses and clean-up logic are checked
// everywhere; the real network (namespaces, tbf, a bounded TCP measurement at 1 Gbit/s)
// only as root, otherwise those cases are reported as skipped, with the reason
// (tests/testing/skip.h). Every namespace a case creates is removed before it ends (checked).
#include "tools/launcher/netem.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/skip.h"

namespace p3::tools {
namespace {

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> NamesWithPrefix(const std::string& prefix) {
  std::vector<std::string> found;
  for (const std::string& name : ListNamespaces()) {
    if (absl::StartsWith(name, prefix)) found.push_back(name);
  }
  return found;
}

// Why the real-network cases cannot run here, or "" when they can.
std::string WhyNoRealNetwork() {
  if (!p3::testing::IsRoot()) {
    return "not root (network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN)";
  }
  const std::string probe = absl::StrCat("p3-", getpid(), "-probe");
  absl::Status added = RunCommand({"ip", "netns", "add", probe});
  if (!added.ok()) return absl::StrCat("cannot create a network namespace: ", added.message());
  RunCommand({"ip", "netns", "delete", probe}).IgnoreError();
  return "";
}

CATCH_TEST_CASE("a benchmark's link at rate 0 is loopback, with no network and no namespaces") {
  absl::StatusOr<BenchmarkLink> link = MakeBenchmarkLink(0);
  CATCH_REQUIRE(link.ok());
  CATCH_CHECK(link->net == nullptr);
  CATCH_CHECK(link->host == "127.0.0.1");
  CATCH_CHECK(link->server_ns.empty());
  CATCH_CHECK(link->client_ns.empty());
}

CATCH_TEST_CASE("machines get host addresses 1..M of the subnet") {
  absl::StatusOr<std::vector<std::string>> addresses = MachineAddresses("10.77.0.0/24", 3);
  CATCH_REQUIRE(addresses.ok());
  CATCH_CHECK(*addresses == std::vector<std::string>{"10.77.0.1", "10.77.0.2", "10.77.0.3"});
  // The host bits of the given address do not matter.
  CATCH_CHECK(MachineAddresses("192.168.7.77/30", 2)->back() == "192.168.7.78");
  absl::StatusOr<std::vector<std::string>> full = MachineAddresses("10.0.0.0/30", 3);
  CATCH_REQUIRE(!full.ok());
  CATCH_CHECK(absl::StrContains(full.status().message(), "room for 2 machines, not 3"));
  CATCH_CHECK(!MachineAddresses("10.0.0.0", 1).ok());
  CATCH_CHECK(!MachineAddresses("300.0.0.0/24", 1).ok());
  CATCH_CHECK(!SubnetProblem("10.0.0.0/31").empty());
  CATCH_CHECK(SubnetProblem("10.77.0.0/24").empty());
}

CATCH_TEST_CASE("the bucket defaults to 128 KiB or one millisecond at the rate") {
  NetworkSpec spec;
  spec.rate_bits_per_second = 1e9;
  CATCH_CHECK(EffectiveBurstBytes(spec) == 128 * 1024);
  spec.rate_bits_per_second = 10e9;
  CATCH_CHECK(EffectiveBurstBytes(spec) == 1250000);
  spec.burst_bytes = 4096;
  CATCH_CHECK(EffectiveBurstBytes(spec) == 4096);
}

CATCH_TEST_CASE("the network is built in its own namespaces with tbf on both ends of each link") {
  NetworkSpec spec;
  spec.run_id = "p3-42";
  spec.machines = 2;
  spec.rate_bits_per_second = 1e9;
  absl::StatusOr<std::vector<std::vector<std::string>>> commands = NetworkCommands(spec);
  CATCH_REQUIRE(commands.ok());
  std::vector<std::string> lines;
  for (const std::vector<std::string>& argv : *commands) lines.push_back(absl::StrJoin(argv, " "));
  for (const char* expected : {
           "ip netns add p3-42-br",
           "ip -n p3-42-br link add br0 type bridge",
           "ip netns add p3-42-m0",
           "ip netns add p3-42-m1",
           "ip link add eth0 netns p3-42-m1 type veth peer name m1 netns p3-42-br",
           "ip -n p3-42-m0 addr add 10.77.0.1/24 dev eth0",
           "ip -n p3-42-m1 addr add 10.77.0.2/24 dev eth0",
           "ip -n p3-42-br link set m0 master br0",
           // Upload: the machine's end; download: the bridge's end.
           "tc -n p3-42-m0 qdisc add dev eth0 root tbf rate 1000000000bit burst 131072 latency "
           "20ms",
           "tc -n p3-42-br qdisc add dev m1 root tbf rate 1000000000bit burst 131072 latency 20ms",
       }) {
    CATCH_CAPTURE(expected);
    CATCH_CHECK(Contains(lines, expected));
  }
  // Nothing is created in the root namespace: every link command names a namespace.
  for (const std::string& line : lines) {
    CATCH_CAPTURE(line);
    CATCH_CHECK((absl::StrContains(line, " -n ") || absl::StartsWith(line, "ip netns add") ||
                 absl::StrContains(line, " netns p3-42-")));
  }
  CATCH_CHECK_FALSE(std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
    return absl::StrContains(line, "sysctl");  // not asked for: the kernel's default stays
  }));
  // A bound on unsent bytes is set in each machine's namespace, never in the root one.
  spec.tcp_notsent_lowat = 131072;
  absl::StatusOr<std::vector<std::vector<std::string>>> bounded = NetworkCommands(spec);
  CATCH_REQUIRE(bounded.ok());
  std::vector<std::string> bounded_lines;
  for (const std::vector<std::string>& argv : *bounded) {
    bounded_lines.push_back(absl::StrJoin(argv, " "));
  }
  for (const char* expected :
       {"ip netns exec p3-42-m0 sysctl -q -w net.ipv4.tcp_notsent_lowat=131072",
        "ip netns exec p3-42-m1 sysctl -q -w net.ipv4.tcp_notsent_lowat=131072"}) {
    CATCH_CAPTURE(expected);
    CATCH_CHECK(Contains(bounded_lines, expected));
  }

  // A congestion control is set in each machine's namespace too.
  spec.congestion_control = "cubic";
  absl::StatusOr<std::vector<std::vector<std::string>>> cubic = NetworkCommands(spec);
  CATCH_REQUIRE(cubic.ok());
  std::vector<std::string> cubic_lines;
  for (const std::vector<std::string>& argv : *cubic) cubic_lines.push_back(absl::StrJoin(argv, " "));
  for (const char* expected :
       {"ip netns exec p3-42-m0 sysctl -q -w net.ipv4.tcp_congestion_control=cubic",
        "ip netns exec p3-42-m1 sysctl -q -w net.ipv4.tcp_congestion_control=cubic"}) {
    CATCH_CAPTURE(expected);
    CATCH_CHECK(Contains(cubic_lines, expected));
  }
  CATCH_CHECK(std::count_if(cubic_lines.begin(), cubic_lines.end(), [](const std::string& line) {
                return absl::StrContains(line, "tcp_congestion_control");
              }) == 2);  // the machines', not the bridge's

  spec.rate_bits_per_second = 0;  // No limit: no qdisc.
  absl::StatusOr<std::vector<std::vector<std::string>>> unlimited = NetworkCommands(spec);
  CATCH_REQUIRE(unlimited.ok());
  for (const std::vector<std::string>& argv : *unlimited) CATCH_CHECK(argv[0] != "tc");
}

CATCH_TEST_CASE("a failed setup step removes the namespaces created so far") {
  std::vector<std::string> ran;
  int calls = 0;
  auto runner = [&](const std::vector<std::string>& argv) -> absl::Status {
    ran.push_back(absl::StrJoin(argv, " "));
    if (++calls == 6) return absl::InternalError("`ip ...` exited with status 2: boom");
    return absl::OkStatus();
  };
  NetworkSpec spec;
  spec.run_id = "p3-7";
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> network =
      EmulatedNetwork::CreateWithRunner(spec, runner);
  CATCH_REQUIRE(!network.ok());
  CATCH_CHECK(absl::StrContains(network.status().message(),
                                "cannot set up the emulated network: `ip ...` exited"));
  // Commands 1 (bridge namespace) and 4 (machine 0) had created namespaces.
  CATCH_REQUIRE(ran.size() == 8);
  CATCH_CHECK(ran[6] == "ip netns delete p3-7-m0");
  CATCH_CHECK(ran[7] == "ip netns delete p3-7-br");
}

CATCH_TEST_CASE("Destroy removes every namespace once, also from the destructor") {
  std::vector<std::string> deleted;
  auto runner = [&](const std::vector<std::string>& argv) -> absl::Status {
    if (argv.size() == 4 && argv[1] == "netns" && argv[2] == "delete") deleted.push_back(argv[3]);
    return absl::OkStatus();
  };
  NetworkSpec spec;
  spec.run_id = "p3-8";
  spec.machines = 3;
  {
    absl::StatusOr<std::unique_ptr<EmulatedNetwork>> network =
        EmulatedNetwork::CreateWithRunner(spec, runner);
    CATCH_REQUIRE(network.ok());
    CATCH_CHECK((*network)->address(2) == "10.77.0.3");
    CATCH_CHECK((*network)->namespace_path(1) == "/var/run/netns/p3-8-m1");
    CATCH_CHECK((*network)->Destroy().ok());
    CATCH_CHECK((*network)->Destroy().ok());  // Twice: nothing more to do.
  }
  CATCH_CHECK(deleted == std::vector<std::string>{"p3-8-m2", "p3-8-m1", "p3-8-m0", "p3-8-br"});

  deleted.clear();
  { CATCH_REQUIRE(EmulatedNetwork::CreateWithRunner(spec, runner).ok()); }
  CATCH_CHECK(deleted.size() == 4);
}

CATCH_TEST_CASE("stale namespaces are those of p3 launchers that no longer run") {
  const std::vector<std::string> names = {"p3-100-br", "p3-100-m0",    "p3-200-m0", "p3-x-m0",
                                          "other",     "p3-300-probe", "p3-100-m"};
  auto alive = [](pid_t pid) { return pid == 200; };
  CATCH_CHECK(StaleNamespaces(names, alive) == std::vector<std::string>{"p3-100-br", "p3-100-m0"});
  CATCH_CHECK(ProcessAlive(getpid()));
}

CATCH_TEST_CASE("without root, creating the network says root is needed") {
  if (geteuid() != 0) {
    absl::StatusOr<std::unique_ptr<EmulatedNetwork>> network = EmulatedNetwork::Create({});
    CATCH_REQUIRE(!network.ok());
    CATCH_CHECK(absl::StrContains(network.status().message(), "needs root"));
    return;
  }
  // As root: try it in a child that gave up root.
  int pipe_fds[2];
  CATCH_REQUIRE(pipe(pipe_fds) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
    absl::StatusOr<std::unique_ptr<EmulatedNetwork>> network = EmulatedNetwork::Create({});
    const std::string message = network.ok() ? "created" : std::string(network.status().message());
    (void)!write(pipe_fds[1], message.data(), message.size());
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) message.append(buffer, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CATCH_REQUIRE(WIFEXITED(status));
  CATCH_REQUIRE(WEXITSTATUS(status) == 0);
  CATCH_CHECK(absl::StrContains(message, "emulating the network needs root"));
}

// Reads lines of `pipe` into `out` until one contains `text` (true) or the output ends
// (false). An empty `text` reads to the end.
bool ReadUntil(FILE* pipe, const std::string& text, std::string* out) {
  char buffer[256];
  std::string line;
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    line += buffer;
    if (line.back() != '\n') continue;
    out->append(line);
    if (!text.empty() && absl::StrContains(line, text)) return true;
    line.clear();
  }
  out->append(line);
  return false;
}

// iperf3's receiver goodput from machine `from` to `to`, in Gbit/s, or -1. (A fixed
// port is fine here: it is inside the test's own, private namespaces.)
double Iperf3Gbps(const EmulatedNetwork& network, int from, int to) {
  // The server serves one test (-1) and prints "Server listening on 5201" once it
  // listens; --forceflush sends that line through the pipe at once. The client starts
  // only then. Both are bounded by `timeout`: a server that never listens ends the read.
  const std::string server_command =
      absl::StrCat("timeout 15 ip netns exec ", network.namespace_name(to),
                   " iperf3 -s -1 --forceflush -B ", network.address(to), " -p 5201 2>&1");
  FILE* server = popen(server_command.c_str(), "r");
  if (server == nullptr) return -1;
  std::string server_out;
  const bool listening = ReadUntil(server, "Server listening", &server_out);
  std::string out;
  if (listening) {
    const std::string client_command = absl::StrCat(
        "timeout 10 ip netns exec ", network.namespace_name(from), " iperf3 -J -t 1 -p 5201 -c ",
        network.address(to), " | grep -A8 '\"sum_received\"' | grep bits_per_second");
    if (FILE* client = popen(client_command.c_str(), "r"); client != nullptr) {
      ReadUntil(client, "", &out);
      pclose(client);
    }
  }
  ReadUntil(server, "", &server_out);  // Until it exits, after its one test.
  pclose(server);
  if (!listening) {
    std::printf("the iperf3 server did not listen:\n%s\n", server_out.c_str());
    return -1;
  }
  // "bits_per_second": 9.5e+08,
  const size_t colon = out.find(':');
  if (colon == std::string::npos) return -1;
  std::string number = out.substr(colon + 1);
  number.erase(std::remove_if(number.begin(), number.end(),
                              [](char c) { return c == ',' || c == ' ' || c == '\n'; }),
               number.end());
  double bits = 0;
  return absl::SimpleAtod(number, &bits) ? bits / 1e9 : -1;
}

CATCH_TEST_CASE("a 1 Gbit/s emulated link measures close to 1 Gbit/s; nothing is left after",
                "[root]") {
  const std::string why = WhyNoRealNetwork();
  if (!why.empty()) {
    p3::testing::ReportSkip("the real-network case", why);
    return;
  }
  NetworkSpec spec;
  spec.run_id = RunIdForPid(getpid());
  spec.machines = 2;
  spec.rate_bits_per_second = 1e9;
  {
    absl::StatusOr<std::unique_ptr<EmulatedNetwork>> network = EmulatedNetwork::Create(spec);
    CATCH_REQUIRE(network.ok());
    const std::vector<std::string> live = NamesWithPrefix(spec.run_id + "-");
    CATCH_CHECK(live == std::vector<std::string>{spec.run_id + "-br", spec.run_id + "-m0",
                                                 spec.run_id + "-m1"});
    for (const auto& [from, to] : RingLinks(2)) {
      absl::StatusOr<LinkMeasurement> m = MeasureLink(**network, from, to, absl::Seconds(1.5));
      CATCH_REQUIRE(m.ok());
      CATCH_CAPTURE(from, to, m->gbps, m->bytes, m->seconds);
      // The limit must hold: never above 1 Gbit/s. How close it gets below depends on
      // free CPU (0.957 on an idle machine, docs/network.md; 0.32 seen with the 2 cores
      // loaded), so the lower bound only checks that traffic flows.
      CATCH_CHECK(m->gbps > 0.05);
      CATCH_CHECK(m->gbps < 1.01);
      CATCH_CHECK(m->seconds > 1.0);
      std::printf("built-in check machine %d -> %d: %.3f Gbit/s\n", from, to, m->gbps);
    }
    if (access("/usr/bin/iperf3", X_OK) == 0) {
      const double gbps = Iperf3Gbps(**network, 0, 1);
      std::printf("iperf3 machine 0 -> 1: %.3f Gbit/s\n", gbps);
      CATCH_CHECK(gbps > 0.05);
      CATCH_CHECK(gbps < 1.01);
    } else {
      p3::testing::ReportSkip("the iperf3 cross-check",
                              "iperf3 is not installed (apt-get install iperf3)");
    }
    CATCH_CHECK(!MeasureLink(**network, 0, 0, absl::Seconds(1)).ok());
  }
  // The destructor removed everything.
  CATCH_CHECK(NamesWithPrefix(spec.run_id + "-").empty());
}

}  // namespace
}  // namespace p3::tools
