#include "tools/launcher/network_setup.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"

namespace p3::tools::launcher {

NetworkSpec NetworkSpecFromConfig(const config::NetworkConfig& network, const std::string& run_id) {
  NetworkSpec spec;
  spec.run_id = run_id;
  spec.machines = network.machines();
  spec.subnet = network.subnet();
  spec.rate_bits_per_second = network.bandwidth_gbps() * 1e9;
  spec.burst_bytes = network.tbf_burst_bytes();
  spec.latency = absl::Milliseconds(network.tbf_latency_ms());
  spec.tcp_notsent_lowat = network.tcp_notsent_lowat();
  spec.congestion_control = network.congestion_control();
  return spec;
}

SysctlReader ProcSysctlReader() {
  return [](const std::string& name) -> absl::StatusOr<std::string> {
    std::string relative = name;  // net.ipv4.x -> net/ipv4/x
    std::replace(relative.begin(), relative.end(), '.', '/');
    const std::string path = "/proc/sys/" + relative;
    // A sysctl is one line; a file that cannot be read, or is empty, has no value.
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok() || text->empty()) {
      return absl::UnavailableError(absl::StrCat("cannot read ", path));
    }
    return text->substr(0, text->find('\n'));
  };
}

absl::StatusOr<std::string> ResolveCongestionControl(const config::NetworkConfig& network,
                                                     const SysctlReader& read) {
  const std::string& wanted = network.congestion_control();
  if (wanted.empty()) {
    absl::StatusOr<std::string> host = read("net.ipv4.tcp_congestion_control");
    if (!host.ok()) return host.status();
    return std::string(absl::StripAsciiWhitespace(*host));
  }
  P3_ASSIGN_OR_RETURN(const std::string available,
                      read("net.ipv4.tcp_available_congestion_control"));
  const std::vector<std::string> names =
      absl::StrSplit(available, absl::ByAnyChar(" \t"), absl::SkipWhitespace());
  if (std::find(names.begin(), names.end(), wanted) == names.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "network.congestion_control: \"", wanted, "\" is not available on this host; "
        "available (net.ipv4.tcp_available_congestion_control): ",
        absl::StrJoin(names, ", ")));
  }
  return wanted;
}

absl::StatusOr<std::unique_ptr<EmulatedNetwork>> SetUpNetwork(const NetworkSetupOptions& options) {
  const config::NetworkConfig& network = options.network;
  const NetworkSpec spec = NetworkSpecFromConfig(network, options.run_id);
  P3_ASSIGN_OR_RETURN(
      const std::string congestion_control,
      ResolveCongestionControl(network,
                               options.read_sysctl ? options.read_sysctl : ProcSysctlReader()));
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> created =
      options.run ? EmulatedNetwork::CreateWithRunner(spec, options.run)
                  : EmulatedNetwork::Create(spec);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("network.bandwidth_gbps = ", network.bandwidth_gbps(), ": ",
                                     created.status().message()));
  }
  const EmulatedNetwork& net = **created;
  options.say(absl::StrFormat(
      "emulated network: %d machine(s) on a bridge, %g Gbit/s per machine and direction "
      "(tbf burst %d bytes, latency %g ms; TCP congestion control %s%s); namespaces %s-m0..m%d, "
      "bridge in %s",
      spec.machines, network.bandwidth_gbps(), EffectiveBurstBytes(spec), network.tbf_latency_ms(),
      congestion_control, spec.congestion_control.empty() ? ", the host's" : "", spec.run_id,
      spec.machines - 1, BridgeNamespace(spec.run_id)));
  for (int m = 0; m < spec.machines; ++m) {
    if (options.processes_by_machine.empty()) {
      options.say(absl::StrCat("  machine ", m, " ", net.address(m)));
      continue;
    }
    const std::vector<std::string> none;
    const std::vector<std::string>& names =
        m < static_cast<int>(options.processes_by_machine.size()) ? options.processes_by_machine[m]
                                                                  : none;
    options.say(absl::StrCat("  machine ", m, " ", net.address(m), ": ",
                             names.empty() ? "(idle)" : absl::StrJoin(names, ", ")));
  }
  const double total = network.bandwidth_gbps() * spec.machines;
  if (total > 20) {
    options.say(absl::StrFormat(
        "note: %d links x %g Gbit/s = %g Gbit/s in all; the CPUs of one machine emulate about "
        "20 Gbit/s in all (docs/network.md), so links may not reach their rate",
        spec.machines, network.bandwidth_gbps(), total));
  }
  return created;
}

absl::StatusOr<std::vector<LinkMeasurement>> CheckLinks(const LinkCheckOptions& options) {
  const std::vector<std::pair<int, int>> links = RingLinks(options.machines);
  const double configured = options.configured_gbps;
  std::vector<LinkMeasurement> measured;
  if (links.empty()) {
    options.say("link check: one machine, no link between machines to measure");
    return measured;
  }
  options.say(absl::StrCat("link check: ", links.size(), " link(s), ",
                           absl::FormatDuration(options.each),
                           " each, one at a time (TCP, receiver's goodput; "
                           "TCP/IP headers make about 95.7% of the rate the expected figure)"));
  std::vector<std::string> outside;
  std::vector<std::string> slow_links;
  for (const auto& [from, to] : links) {
    if (options.before_each) P3_RETURN_IF_ERROR(options.before_each());
    P3_ASSIGN_OR_RETURN(const LinkMeasurement m, options.measure(from, to, options.each));
    measured.push_back(m);
    const double ratio = m.gbps / configured;
    // Above the rate, or nothing at all: the emulation is broken. Well below it: usually
    // the cores are busy (the shaping cannot make a link faster than the CPU allows).
    const bool broken = ratio > 1.05 || m.gbps <= 0;
    const bool slow = ratio < 0.85;
    options.say(absl::StrFormat(
        "  machine %d -> machine %d: %.3f Gbit/s measured, %.3f configured (%.1f%%)%s", from, to,
        m.gbps, configured, 100 * ratio,
        broken ? "  LIMIT NOT HELD"
        : slow ? "  below 85% (busy machine?)"
               : ""));
    if (broken) outside.push_back(absl::StrCat(from, "->", to));
    if (slow) slow_links.push_back(absl::StrCat(from, "->", to));
  }
  if (!slow_links.empty()) {
    options.say(absl::StrCat("warning: link(s) ", absl::StrJoin(slow_links, ", "),
                             " below 85% of the configured rate: is the machine busy? "
                             "(docs/network.md)"));
  }
  if (!outside.empty()) {
    const std::string message =
        absl::StrCat("link(s) ", absl::StrJoin(outside, ", "),
                     " above 105% of the configured rate, or carrying nothing: the limit does "
                     "not hold (docs/network.md)");
    if (options.strict) return absl::FailedPreconditionError(message);
    options.say("warning: " + message);
  }
  return measured;
}

void TearDownNetwork(std::unique_ptr<EmulatedNetwork>& network, const Say& say, std::ostream& err) {
  if (network == nullptr) return;
  const std::string run_id = network->spec().run_id;
  absl::Status status = network->Destroy();
  network.reset();
  if (status.ok()) {
    say(absl::StrCat("removed the emulated network (", run_id, "-*)"));
  } else {
    err << "[p3] warning: removing the emulated network: " << status.message()
        << "\n[p3] `launch_cluster --cleanup_network` removes what is left" << std::endl;
  }
}

int CleanupStaleNetworks(std::ostream& out, std::ostream& err) {
  if (geteuid() != 0) {
    err << "launch_cluster: --cleanup_network needs root (it deletes network namespaces)\n";
    return 2;
  }
  const std::vector<std::string> stale = StaleNamespaces(ListNamespaces(), ProcessAlive);
  if (stale.empty()) {
    out << "[p3] no stale network namespaces (p3-<pid>-*) to remove" << std::endl;
    return 0;
  }
  int failures = 0;
  for (const std::string& name : stale) {
    absl::Status status = DeleteNamespace(name);
    if (status.ok()) {
      out << "[p3] removed network namespace " << name << std::endl;
    } else {
      err << "[p3] " << status.message() << std::endl;
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace p3::tools::launcher
