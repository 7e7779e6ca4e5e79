// A nudge for this process's TCP connections that stay stuck after a link fault.
//
// After a link outage or brownout, Linux's BBR (the congestion control of many hosts,
// this project's VM included) can be left with a bandwidth estimate of a few kbit/s: its
// delivery-rate samples span the fault. It then paces the connection at that rate, its
// samples cannot exceed the rate it paces at, and it probes upwards by a quarter once
// every 8 round trips, which at that rate take seconds each. With hundreds of kilobytes
// queued the connection is stuck long after the link is back, and the run ends at
// peer_timeout (seen: 11 kbit/s for 15 s; docs/results/reliability/link_faults.md).
// Re-initialising the connection's congestion control (TCP_CONGESTION set to "reno" and
// back to its own) starts its estimates afresh; nothing else about the connection
// changes, and no byte is lost or repeated.
//
// The worker and the server call it at each stall report (cluster.stall_report_s), on
// their own connections only.
//
// Example:
//   std::vector<TcpNudge> nudged = NudgeStuckTcpConnections({.remote_ports = {7070}});
//   if (!nudged.empty()) LogLine("[stall] worker 0: " + DescribeNudges(nudged));
//
// Thread-safe (the kernel serialises each socket's options). Linux only.
#ifndef P3_P3_BASE_TCP_NUDGE_H_
#define P3_P3_BASE_TCP_NUDGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace p3 {

// Which of the process's TCP connections to consider: those whose local port is in
// `local_ports` (a server's listening port) or whose remote port is in `remote_ports`
// (a worker's servers). Both empty: none.
struct TcpNudgeFilter {
  std::vector<int> local_ports;
  std::vector<int> remote_ports;
};

// The ports of "host:port" addresses ("10.0.0.1:7070", "[::1]:7070"); an address without
// one is left out.
std::vector<int> PortsOf(const std::vector<std::string>& addresses);

// What TCP_INFO and TCP_CONGESTION say of one connection.
struct TcpConnectionState {
  int fd = -1;
  std::string local;               // "10.77.0.2:44538"
  std::string peer;                // "10.77.0.3:34359"
  int local_port = 0;
  int remote_port = 0;
  int state = 0;                   // tcpi_state: 1 is established
  int ca_state = 0;                // tcpi_ca_state: 0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss
  uint32_t unacked = 0;            // segments sent and not acknowledged
  uint32_t notsent = 0;            // bytes queued, not sent yet
  uint32_t lost = 0;               // of them, marked lost
  uint32_t backoff = 0;            // retransmission timeouts in a row
  uint64_t pacing_rate = 0;        // bytes per second
  std::string congestion_control;  // e.g. "bbr"
};

// Whether `c` is stuck after a fault: established, with data to deliver (segments
// unacknowledged or bytes not sent yet), and paced below kSlowPacing, far below any link
// a cluster trains over. A connection with nothing to deliver is not (it waits for its
// peer), nor one that a slow link (a 1 Mbit/s brownout) paces at the link's rate, nor
// one merely waiting for a retransmission timeout (resetting would not shorten it).
inline constexpr uint64_t kSlowPacing = 12500;  // bytes/s: 100 kbit/s
bool LooksStuck(const TcpConnectionState& c);

// Whether `c` matches `filter`.
bool Matches(const TcpNudgeFilter& filter, const TcpConnectionState& c);

// The process's TCP connections that match `filter` (its open file descriptors that are
// TCP sockets, from /proc/self/fd).
std::vector<TcpConnectionState> ListTcpConnections(const TcpNudgeFilter& filter);

// Sets socket `fd`'s congestion control to "reno" and back to `name`, which makes the
// kernel initialise `name`'s state afresh. A "reno" socket is left as it is (reno keeps
// no estimate to reset). Any process may choose "reno"; should the way back be refused
// (`name` not allowed to an unprivileged process), the connection stays on reno and the
// error says so.
absl::Status ResetCongestionControl(int fd, const std::string& name);

struct TcpNudge {
  TcpConnectionState before;
  absl::Status status;  // of ResetCongestionControl
};

// Resets the congestion control of every connection ListTcpConnections(filter) finds
// that LooksStuck; returns what it did.
std::vector<TcpNudge> NudgeStuckTcpConnections(const TcpNudgeFilter& filter);

// "reset the congestion control of 1 stuck TCP connection: 10.77.0.2:44538 ->
// 10.77.0.3:34359 (bbr, 196 of 198 unacknowledged segments lost, paced at 13.7 kbit/s)";
// a failed reset says why. "" for none.
std::string DescribeNudges(const std::vector<TcpNudge>& nudges);

}  // namespace p3

#endif  // P3_P3_BASE_TCP_NUDGE_H_
