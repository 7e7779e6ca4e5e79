// The launcher's emulated network (docs/network.md), on top of tools/launcher/netem.h: building
// it from the config's `network` block and saying what was built, measuring its links
// (--check_network, network.check_links), and removing namespaces left behind by
// launchers that were killed (--cleanup_network).
//
// Example:
//   NetworkSetupOptions setup;
//   setup.network = config.network();
//   setup.run_id = RunIdForPid(getpid());
//   setup.processes_by_machine = {{"server_0", "worker_0"}, {"server_1", "worker_1"}};
//   setup.say = [](const std::string& line) { std::cout << "[p3] " << line << "\n"; };
//   absl::StatusOr<std::unique_ptr<EmulatedNetwork>> network = SetUpNetwork(setup);
//
//   LinkCheckOptions check;
//   check.configured_gbps = config.network().bandwidth_gbps();
//   check.machines = (*network)->machines();
//   check.measure = [&](int from, int to, absl::Duration d) {
//     return MeasureLink(**network, from, to, d);
//   };
//   check.say = setup.say;
//   absl::StatusOr<std::vector<LinkMeasurement>> links = CheckLinks(check);
//
// Stateless functions; thread-compatible. Building and measuring a real network needs root.
#ifndef P3_TOOLS_LAUNCHER_NETWORK_SETUP_H_
#define P3_TOOLS_LAUNCHER_NETWORK_SETUP_H_

#include <functional>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/config.pb.h"
#include "tools/launcher/netem.h"

namespace p3::tools::launcher {

using Say = std::function<void(const std::string&)>;

// The NetworkSpec of the config's `network` block for the network named `run_id`.
NetworkSpec NetworkSpecFromConfig(const config::NetworkConfig& network, const std::string& run_id);

// Reads a sysctl by name ("net.ipv4.tcp_congestion_control"), trailing newline removed.
using SysctlReader = std::function<absl::StatusOr<std::string>(const std::string& name)>;
// The host's, from /proc/sys.
SysctlReader ProcSysctlReader();

// The TCP congestion control the emulated machines will use: network.congestion_control
// when set, after checking that the host has it (InvalidArgument naming the field and
// listing the host's net.ipv4.tcp_available_congestion_control); else the host's
// net.ipv4.tcp_congestion_control, which a new namespace inherits.
absl::StatusOr<std::string> ResolveCongestionControl(const config::NetworkConfig& network,
                                                     const SysctlReader& read);

struct NetworkSetupOptions {
  // The config's network block (bandwidth_gbps > 0). Required.
  config::NetworkConfig network;
  // Prefix of the namespace names, RunIdForPid(launcher's pid). Default: "p3-0".
  std::string run_id = "p3-0";
  // The names of the processes on each machine, listed with the machine's address; empty
  // (--check_network): only the addresses. Default: empty.
  std::vector<std::vector<std::string>> processes_by_machine;
  // Runs the `ip` / `tc` commands; empty: the real ones (EmulatedNetwork::Create, root).
  // Default: empty.
  CommandRunner run;
  // Reads the host's sysctls (ResolveCongestionControl); empty: ProcSysctlReader().
  // Default: empty.
  SysctlReader read_sysctl;
  // Receives the description lines. Required.
  Say say;
};

// Builds the network and describes it (machines, addresses, processes, the TCP congestion
// control; a note when the links add up to more than one machine's CPUs can emulate).
// Errors are prefixed with "network.bandwidth_gbps = <rate>: ", except an unavailable
// network.congestion_control, refused before anything is built.
absl::StatusOr<std::unique_ptr<EmulatedNetwork>> SetUpNetwork(const NetworkSetupOptions& options);

struct LinkCheckOptions {
  // The configured rate of every link, Gbit/s. Required.
  double configured_gbps = 0;
  // Number of machines; RingLinks(machines) are measured. Required.
  int machines = 0;
  // How long each link is measured. Default: 1 second.
  absl::Duration each = absl::Seconds(1);
  // A link above 105% of its rate, or carrying nothing, is an error (else a warning).
  // Default: false.
  bool strict = false;
  // Measures one link. Required.
  std::function<absl::StatusOr<LinkMeasurement>(int from, int to, absl::Duration)> measure;
  // Called before each link; a non-OK status (an interrupt) ends the check with it.
  // Default: none.
  std::function<absl::Status()> before_each;
  // Receives one line per link and the verdict. Required.
  Say say;
};

// Measures the links one at a time and reports each against the configured rate; links
// below 85% are a warning (a busy machine). Returns the measurements.
absl::StatusOr<std::vector<LinkMeasurement>> CheckLinks(const LinkCheckOptions& options);

// Removes `network` (and resets it) and says so; on failure warns on `err` and points
// at --cleanup_network. Nothing when null.
void TearDownNetwork(std::unique_ptr<EmulatedNetwork>& network, const Say& say,
                     std::ostream& err = std::cerr);

// --cleanup_network: deletes the namespaces of launchers that no longer run. Returns the
// exit status (0; 1 when one could not be deleted; 2 when not root).
int CleanupStaleNetworks(std::ostream& out = std::cout, std::ostream& err = std::cerr);

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_NETWORK_SETUP_H_
