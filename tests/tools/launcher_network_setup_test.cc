#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "proto/config.h"
#include "tools/launcher/network_setup.h"

namespace p3::tools::launcher {
namespace {

config::NetworkConfig Network(const std::vector<std::string>& overrides) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig("", overrides);
  CATCH_REQUIRE(config.ok());
  return config->network();
}

CATCH_TEST_CASE("the network spec comes from the config's network block") {
  const config::NetworkConfig network =
      Network({"network.bandwidth_gbps=2.5", "network.machines=3", "network.subnet=10.9.0.0/24",
               "network.tbf_burst_bytes=65536", "network.tbf_latency_ms=7"});
  const NetworkSpec spec = NetworkSpecFromConfig(network, "p3-42");
  CATCH_CHECK(spec.run_id == "p3-42");
  CATCH_CHECK(spec.machines == 3);
  CATCH_CHECK(spec.subnet == "10.9.0.0/24");
  CATCH_CHECK(spec.rate_bits_per_second == 2.5e9);
  CATCH_CHECK(spec.burst_bytes == 65536);
  CATCH_CHECK(spec.latency == absl::Milliseconds(7));
}

// A host with `current` as its congestion control and `available` to choose from.
SysctlReader FakeHost(const std::string& current, const std::string& available) {
  return [=](const std::string& name) -> absl::StatusOr<std::string> {
    if (name == "net.ipv4.tcp_congestion_control") return current;
    if (name == "net.ipv4.tcp_available_congestion_control") return available;
    return absl::NotFoundError(name);
  };
}

CATCH_TEST_CASE("the host's sysctls are read from /proc/sys by name, without the newline") {
  const SysctlReader read = ProcSysctlReader();
  // kernel.ostype is "Linux\n" in /proc/sys/kernel/ostype on every Linux host.
  absl::StatusOr<std::string> ostype = read("kernel.ostype");
  CATCH_REQUIRE(ostype.ok());
  CATCH_CHECK(*ostype == "Linux");
  absl::StatusOr<std::string> missing = read("net.ipv4.no_such_sysctl");
  CATCH_CHECK(missing.status().code() == absl::StatusCode::kUnavailable);
  CATCH_CHECK(missing.status().message() == "cannot read /proc/sys/net/ipv4/no_such_sysctl");
}

CATCH_TEST_CASE("the congestion control is the configured one if the host has it, else the host's") {
  const SysctlReader host = FakeHost("bbr", "reno bbr cubic");
  absl::StatusOr<std::string> inherited = ResolveCongestionControl(Network({}), host);
  CATCH_REQUIRE(inherited.ok());
  CATCH_CHECK(*inherited == "bbr");
  absl::StatusOr<std::string> chosen =
      ResolveCongestionControl(Network({"network.congestion_control=cubic"}), host);
  CATCH_REQUIRE(chosen.ok());
  CATCH_CHECK(*chosen == "cubic");
  absl::StatusOr<std::string> missing =
      ResolveCongestionControl(Network({"network.congestion_control=vegas"}), host);
  CATCH_REQUIRE(!missing.ok());
  CATCH_CHECK(missing.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(missing.status().message() ==
              "network.congestion_control: \"vegas\" is not available on this host; available "
              "(net.ipv4.tcp_available_congestion_control): reno, bbr, cubic");

  // Refused before any namespace is made; the one chosen is said.
  NetworkSetupOptions options;
  options.network = Network({"network.bandwidth_gbps=1", "network.congestion_control=vegas"});
  options.read_sysctl = host;
  int commands = 0;
  options.run = [&](const std::vector<std::string>&) {
    ++commands;
    return absl::OkStatus();
  };
  std::vector<std::string> said;
  options.say = [&](const std::string& line) { said.push_back(line); };
  CATCH_CHECK(!SetUpNetwork(options).ok());
  CATCH_CHECK(commands == 0);
  options.network = Network({"network.bandwidth_gbps=1", "network.congestion_control=cubic"});
  CATCH_REQUIRE(SetUpNetwork(options).ok());
  CATCH_CHECK(commands > 0);
  CATCH_CHECK(absl::StrContains(said[0], "TCP congestion control cubic)"));
  options.network = Network({"network.bandwidth_gbps=1"});
  said.clear();
  CATCH_REQUIRE(SetUpNetwork(options).ok());
  CATCH_CHECK(absl::StrContains(said[0], "TCP congestion control bbr, the host's)"));
}

CATCH_TEST_CASE("setting up lists every machine with its address and processes") {
  std::vector<std::vector<std::string>> commands;
  NetworkSetupOptions options;
  options.network = Network({"network.bandwidth_gbps=1", "network.machines=3"});
  options.run_id = "p3-7";
  options.processes_by_machine = {{"server_0", "worker_0"}, {"worker_1"}, {}};
  options.run = [&](const std::vector<std::string>& argv) {
    commands.push_back(argv);
    return absl::OkStatus();
  };
  std::vector<std::string> said;
  options.say = [&](const std::string& line) { said.push_back(line); };
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> network = SetUpNetwork(options);
  CATCH_REQUIRE(network.ok());
  CATCH_CHECK(!commands.empty());
  CATCH_REQUIRE(said.size() == 4);
  CATCH_CHECK(absl::StartsWith(said[0], "emulated network: 3 machine(s) on a bridge, 1 Gbit/s"));
  CATCH_CHECK(said[1] == "  machine 0 10.77.0.1: server_0, worker_0");
  CATCH_CHECK(said[2] == "  machine 1 10.77.0.2: worker_1");
  CATCH_CHECK(said[3] == "  machine 2 10.77.0.3: (idle)");

  // Torn down: said, and the network is gone.
  std::vector<std::string> after;
  std::ostringstream err;
  TearDownNetwork(
      *network, [&](const std::string& line) { after.push_back(line); }, err);
  CATCH_CHECK(*network == nullptr);
  CATCH_CHECK(after == std::vector<std::string>{"removed the emulated network (p3-7-*)"});
  CATCH_CHECK(err.str().empty());
}

CATCH_TEST_CASE("fast links add a note; a failing command is an error naming the rate") {
  NetworkSetupOptions options;
  options.network = Network({"network.bandwidth_gbps=25", "network.machines=2"});
  options.run = [](const std::vector<std::string>&) { return absl::OkStatus(); };
  std::vector<std::string> said;
  options.say = [&](const std::string& line) { said.push_back(line); };
  CATCH_REQUIRE(SetUpNetwork(options).ok());
  CATCH_CHECK(said[1] == "  machine 0 10.77.0.1");  // No processes given: addresses only.
  CATCH_CHECK(absl::StartsWith(said.back(), "note: 2 links x 25 Gbit/s = 50 Gbit/s in all"));

  options.run = [](const std::vector<std::string>&) {
    return absl::PermissionDeniedError("ip: Operation not permitted");
  };
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> failed = SetUpNetwork(options);
  CATCH_REQUIRE(!failed.ok());
  CATCH_CHECK(absl::StartsWith(failed.status().message(), "network.bandwidth_gbps = 25: "));
  CATCH_CHECK(absl::StrContains(failed.status().message(), "Operation not permitted"));
}

// A fake link measurement: `gbps[from]` for the link from -> to.
LinkCheckOptions FakeCheck(const std::vector<double>& gbps, std::vector<std::string>* said) {
  LinkCheckOptions check;
  check.configured_gbps = 1;
  check.machines = static_cast<int>(gbps.size());
  check.measure = [gbps](int from, int to, absl::Duration) -> absl::StatusOr<LinkMeasurement> {
    LinkMeasurement m;
    m.from = from;
    m.to = to;
    m.gbps = gbps[from];
    return m;
  };
  check.say = [said](const std::string& line) { said->push_back(line); };
  return check;
}

CATCH_TEST_CASE("every machine's link is measured once, around the ring") {
  std::vector<std::string> said;
  absl::StatusOr<std::vector<LinkMeasurement>> links =
      CheckLinks(FakeCheck({0.95, 0.96, 0.9}, &said));
  CATCH_REQUIRE(links.ok());
  CATCH_REQUIRE(links->size() == 3);
  CATCH_CHECK((*links)[2].from == 2);
  CATCH_CHECK((*links)[2].to == 0);
  CATCH_CHECK(said[1] ==
              "  machine 0 -> machine 1: 0.950 Gbit/s measured, 1.000 configured (95.0%)");
  CATCH_CHECK(said.size() == 4);  // Header and three links: no warning.
}

CATCH_TEST_CASE("a link above its rate fails a strict check and warns otherwise; slow ones warn") {
  std::vector<std::string> said;
  LinkCheckOptions check = FakeCheck({1.2, 0.5}, &said);
  check.strict = true;
  absl::StatusOr<std::vector<LinkMeasurement>> strict = CheckLinks(check);
  CATCH_REQUIRE(!strict.ok());
  CATCH_CHECK(absl::IsFailedPrecondition(strict.status()));
  CATCH_CHECK(absl::StartsWith(strict.status().message(), "link(s) 0->1 above 105%"));
  CATCH_CHECK(absl::EndsWith(said[1], "(120.0%)  LIMIT NOT HELD"));
  CATCH_CHECK(absl::EndsWith(said[2], "(50.0%)  below 85% (busy machine?)"));
  CATCH_CHECK(absl::StartsWith(said[3], "warning: link(s) 1->0 below 85%"));

  said.clear();
  check.strict = false;
  absl::StatusOr<std::vector<LinkMeasurement>> lenient = CheckLinks(check);
  CATCH_REQUIRE(lenient.ok());
  CATCH_CHECK(lenient->size() == 2);
  CATCH_CHECK(absl::StartsWith(said.back(), "warning: link(s) 0->1 above 105%"));
}

CATCH_TEST_CASE("an interrupt ends the check; one machine has no link to check") {
  std::vector<std::string> said;
  LinkCheckOptions check = FakeCheck({1, 1}, &said);
  int calls = 0;
  check.before_each = [&calls]() {
    return ++calls == 2 ? absl::CancelledError("interrupted by SIGINT") : absl::OkStatus();
  };
  absl::StatusOr<std::vector<LinkMeasurement>> interrupted = CheckLinks(check);
  CATCH_CHECK(absl::IsCancelled(interrupted.status()));
  CATCH_CHECK(calls == 2);

  said.clear();
  absl::StatusOr<std::vector<LinkMeasurement>> single = CheckLinks(FakeCheck({1}, &said));
  CATCH_REQUIRE(single.ok());
  CATCH_CHECK(single->empty());
  CATCH_CHECK(said == std::vector<std::string>{
                          "link check: one machine, no link between machines to measure"});
}

}  // namespace
}  // namespace p3::tools::launcher
