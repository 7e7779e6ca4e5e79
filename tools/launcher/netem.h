// Emulated cluster links on one machine: one Linux network namespace per emulated
// machine, all attached to a bridge, each machine's link limited in both directions with
// tbf (the kernel's token bucket filter). See docs/network.md.
//
// Layout of one network (run id R, M machines, subnet 10.77.0.0/24):
//
//   namespace R-br:  bridge "br0"; veth ends "m0".."m<M-1>" enslaved to it, each with a
//                    tbf qdisc = the machine's download limit
//   namespace R-m<i>: veth end "eth0" with address 10.77.0.<i+1>/24 and a tbf qdisc = the
//                    machine's upload limit; "lo" up
//
// Nothing is created in the root namespace (so runs in parallel do not clash, and
// deleting the namespaces removes every link and qdisc). Processes placed on machine i
// run in namespace R-m<i> (the launcher calls setns() in the child before exec, as
// `ip netns exec R-m<i> ...` would); two processes on the same machine talk over that
// namespace's loopback, unlimited, as on a real host.
//
// Run ids are "p3-<launcher pid>", so StaleNamespaces() can find the namespaces of
// launchers that no longer run (killed with SIGKILL) for `launch_cluster --cleanup_network`.
//
// Everything here needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) except the pure
// functions (NetworkCommands, MachineAddresses, ...), which tests check without root.
//
// Example:
//   p3::tools::NetworkSpec spec;
//   spec.run_id = p3::tools::RunIdForPid(getpid());
//   spec.machines = 2;
//   spec.rate_bits_per_second = 1e9;
//   absl::StatusOr<std::unique_ptr<p3::tools::EmulatedNetwork>> net =
//       p3::tools::EmulatedNetwork::Create(spec);
//   if (!net.ok()) return net.status();
//   absl::StatusOr<p3::tools::LinkMeasurement> m =
//       p3::tools::MeasureLink(**net, /*from=*/0, /*to=*/1, absl::Seconds(2));
//   // m->gbps is about 0.95 (TCP/IP overhead on a 1 Gbit/s link).
//   (*net)->Destroy();   // Also done by the destructor.
//
// EmulatedNetwork is thread-compatible (one owner); it does not fork threads.
#ifndef P3_TOOLS_LAUNCHER_NETEM_H_
#define P3_TOOLS_LAUNCHER_NETEM_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace p3::tools {

struct NetworkSpec {
  // Prefix of every namespace name; unique per live network. Default: "p3-0".
  std::string run_id = "p3-0";
  // Number of emulated machines. Default: 2.
  int machines = 2;
  // IPv4 subnet in CIDR notation; machine i gets host address i + 1. Default: "10.77.0.0/24".
  std::string subnet = "10.77.0.0/24";
  // Link rate per machine and direction, bits per second; 0 = no tbf (veth speed).
  // Default: 0.
  double rate_bits_per_second = 0;
  // tbf bucket size in bytes; 0 = max(128 KiB, one millisecond at the rate). Default: 0.
  int64_t burst_bytes = 0;
  // tbf queue bound (how long a packet may wait; not an added delay). Default: 20 ms.
  absl::Duration latency = absl::Milliseconds(20);
  // net.ipv4.tcp_notsent_lowat in every machine's namespace; 0: left at the kernel's
  // default. Default: 0.
  int64_t tcp_notsent_lowat = 0;
  // net.ipv4.tcp_congestion_control in every machine's namespace (e.g. "cubic"); empty:
  // what the namespace inherits from the host. Default: empty.
  std::string congestion_control;
};

// "p3-<pid>": the run id of the network of the launcher with process id `pid`.
std::string RunIdForPid(pid_t pid);

// The addresses of `machines` machines in `subnet` ("a.b.c.d/len", IPv4): host addresses
// 1..machines. Errors name the subnet and say how many machines fit.
absl::StatusOr<std::vector<std::string>> MachineAddresses(const std::string& subnet, int machines);

// Checks a subnet string (used by config validation): "" if fine, else what is wrong.
std::string SubnetProblem(const std::string& subnet);

// Namespace names of a network.
std::string MachineNamespace(const std::string& run_id, int machine);
std::string BridgeNamespace(const std::string& run_id);

// tbf's bucket for `spec` (burst_bytes, or the default described there).
int64_t EffectiveBurstBytes(const NetworkSpec& spec);

// The `ip` / `tc` command lines that build the network, in order (each an argv).
absl::StatusOr<std::vector<std::vector<std::string>>> NetworkCommands(const NetworkSpec& spec);

// Runs one command (argv[0] looked up in PATH) to completion; OK if it exits 0, else an
// error with the command line and its stderr. Replaceable for tests.
using CommandRunner = std::function<absl::Status(const std::vector<std::string>& argv)>;
absl::Status RunCommand(const std::vector<std::string>& argv);

// Names of the namespaces in /var/run/netns (those `ip netns list` shows).
std::vector<std::string> ListNamespaces();

// Namespaces among `names` that belong to a p3 network ("p3-<pid>-...") whose launcher
// `alive(pid)` says no longer runs.
std::vector<std::string> StaleNamespaces(const std::vector<std::string>& names,
                                         const std::function<bool(pid_t)>& alive);

// Whether a process `pid` exists (kill(pid, 0)).
bool ProcessAlive(pid_t pid);

// Deletes namespace `name` (`ip netns delete`); its links and qdiscs go with it.
absl::Status DeleteNamespace(const std::string& name, const CommandRunner& run = RunCommand);

// A live emulated network. Destroy() (or the destructor) removes everything it created.
class EmulatedNetwork {
 public:
  // Builds the network of `spec` with `ip` and `tc`. Needs root: without it the error
  // says so before anything runs. On any failure, whatever was created is removed before
  // returning.
  static absl::StatusOr<std::unique_ptr<EmulatedNetwork>> Create(const NetworkSpec& spec);

  // The same with every command run by `run` (tests), and no check for root.
  static absl::StatusOr<std::unique_ptr<EmulatedNetwork>> CreateWithRunner(const NetworkSpec& spec,
                                                                           CommandRunner run);

  ~EmulatedNetwork();
  EmulatedNetwork(const EmulatedNetwork&) = delete;
  EmulatedNetwork& operator=(const EmulatedNetwork&) = delete;

  // Removes every namespace of the network. Safe to call twice; returns the first error
  // (after trying to delete all of them).
  absl::Status Destroy();

  const NetworkSpec& spec() const { return spec_; }
  int machines() const { return spec_.machines; }
  // Machine i's address, e.g. "10.77.0.1".
  const std::string& address(int machine) const { return addresses_[machine]; }
  // Machine i's namespace name and its file, for setns(2): /var/run/netns/<name>.
  std::string namespace_name(int machine) const;
  std::string namespace_path(int machine) const;

 private:
  EmulatedNetwork(NetworkSpec spec, std::vector<std::string> addresses, CommandRunner run);

  const NetworkSpec spec_;
  const std::vector<std::string> addresses_;
  const CommandRunner run_;
  std::vector<std::string> created_;  // Namespaces to delete.
};

// The link of a benchmark between two machines (bench_streaming, grpc_api_probe): an
// emulated network of 2 machines at `gbps` per machine and direction (run id
// RunIdForPid(getpid()), so that `launch_cluster --cleanup_network` finds leftovers), the
// server on machine 1 and the client on machine 0; `gbps` 0: loopback, no namespaces.
struct BenchmarkLink {
  std::unique_ptr<EmulatedNetwork> net;  // null on loopback
  std::string host = "127.0.0.1";        // the server's address
  std::string server_ns;                 // namespace paths; "" on loopback
  std::string client_ns;
};
absl::StatusOr<BenchmarkLink> MakeBenchmarkLink(double gbps);

// Moves the calling process into the network namespace at `path` (setns(2)). For use
// between fork() and exec(): only async-signal-safe calls. Returns 0 or an errno value.
int EnterNamespace(const char* path);

// One measured link: TCP goodput from machine `from` to machine `to`.
struct LinkMeasurement {
  int from = 0;
  int to = 0;
  int64_t bytes = 0;
  double seconds = 0;
  double gbps = 0;  // bytes * 8 / seconds / 1e9.
};

// Sends data over TCP from machine `from` to machine `to` for `duration` (a receiver in
// `to`'s namespace, a sender in `from`'s, both forked children), and reports the
// receiver's goodput. Bounded: both children are killed `duration` + 10 s after the start
// at the latest. Measures `from`'s upload and `to`'s download limit at once.
absl::StatusOr<LinkMeasurement> MeasureLink(const EmulatedNetwork& network, int from, int to,
                                            absl::Duration duration);

// The links MeasureLink() should check so that every machine's upload and download is
// measured once: i -> (i + 1) mod M for each machine i (none for M = 1).
std::vector<std::pair<int, int>> RingLinks(int machines);

}  // namespace p3::tools

#endif  // P3_TOOLS_LAUNCHER_NETEM_H_
