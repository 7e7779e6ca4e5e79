#include "p3/base/tcp_nudge.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace p3 {
namespace {

constexpr int kEstablished = 1;       // tcpi_state TCP_ESTABLISHED (<netinet/tcp.h>)
constexpr size_t kCongestionName = 16;  // TCP_CA_NAME_MAX of the kernel

// "10.77.0.2:44538" (an IPv4-mapped IPv6 address as IPv4), "[::1]:7070"; sets `port`.
std::string FormatEndpoint(const sockaddr_storage& address, int* port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    *port = ntohs(v4.sin_port);
    return absl::StrCat(text, ":", *port);
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
  *port = ntohs(v6.sin6_port);
  if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
    inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], text, sizeof(text));
    return absl::StrCat(text, ":", *port);
  }
  inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
  return absl::StrCat("[", text, "]:", *port);
}

std::string CongestionControlOf(int fd) {
  char name[kCongestionName] = {};
  socklen_t size = sizeof(name);
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &size) != 0) return "";
  return std::string(name, strnlen(name, std::min<size_t>(size, sizeof(name))));
}

// The state of TCP socket `fd`, or false when it is not a connected TCP socket.
bool ReadState(int fd, TcpConnectionState* out) {
  int protocol = 0;
  socklen_t size = sizeof(protocol);
  if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &size) != 0 || protocol != IPPROTO_TCP) {
    return false;
  }
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_size = sizeof(local);
  socklen_t peer_size = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0 ||
      (local.ss_family != AF_INET && local.ss_family != AF_INET6)) {
    return false;
  }
  tcp_info info{};
  socklen_t info_size = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &info_size) != 0) return false;
  out->fd = fd;
  out->local = FormatEndpoint(local, &out->local_port);
  out->peer = FormatEndpoint(peer, &out->remote_port);
  out->state = info.tcpi_state;
  out->ca_state = info.tcpi_ca_state;
  out->unacked = info.tcpi_unacked;
  out->lost = info.tcpi_lost;
  out->backoff = info.tcpi_backoff;
  out->notsent = info_size >= offsetof(tcp_info, tcpi_notsent_bytes) + sizeof(uint32_t)
                     ? info.tcpi_notsent_bytes
                     : 0;
  out->pacing_rate = info_size >= offsetof(tcp_info, tcpi_pacing_rate) + sizeof(uint64_t)
                         ? info.tcpi_pacing_rate
                         : 0;
  out->congestion_control = CongestionControlOf(fd);
  return true;
}

bool Contains(const std::vector<int>& ports, int port) {
  return std::find(ports.begin(), ports.end(), port) != ports.end();
}

std::string Rate(uint64_t bytes_per_second) {
  const double bits = static_cast<double>(bytes_per_second) * 8;
  if (bits >= 1e9) return absl::StrFormat("%.1f Gbit/s", bits / 1e9);
  if (bits >= 1e6) return absl::StrFormat("%.1f Mbit/s", bits / 1e6);
  return absl::StrFormat("%.1f kbit/s", bits / 1e3);
}

}  // namespace

std::vector<int> PortsOf(const std::vector<std::string>& addresses) {
  std::vector<int> ports;
  for (const std::string& address : addresses) {
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon != std::string::npos && absl::SimpleAtoi(address.substr(colon + 1), &port) &&
        port > 0 && port < 65536) {
      ports.push_back(port);
    }
  }
  return ports;
}

bool LooksStuck(const TcpConnectionState& c) {
  const bool queued = c.unacked > 0 || c.notsent > 0;
  return c.state == kEstablished && queued && c.pacing_rate > 0 && c.pacing_rate < kSlowPacing;
}

bool Matches(const TcpNudgeFilter& filter, const TcpConnectionState& c) {
  return Contains(filter.local_ports, c.local_port) || Contains(filter.remote_ports, c.remote_port);
}

std::vector<TcpConnectionState> ListTcpConnections(const TcpNudgeFilter& filter) {
  std::vector<TcpConnectionState> out;
  if (filter.local_ports.empty() && filter.remote_ports.empty()) return out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  std::vector<int> fds;
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (absl::SimpleAtoi(entry->d_name, &fd) && fd != dirfd(dir)) fds.push_back(fd);
  }
  closedir(dir);
  for (int fd : fds) {
    TcpConnectionState c;
    if (ReadState(fd, &c) && Matches(filter, c)) out.push_back(std::move(c));
  }
  return out;
}

absl::Status ResetCongestionControl(int fd, const std::string& name) {
  if (name.empty() || name == "reno") return absl::OkStatus();
  for (const std::string& to : {std::string("reno"), name}) {
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, to.data(), to.size()) != 0) {
      return absl::InternalError(absl::StrCat("setting TCP_CONGESTION to ", to,
                                              " failed: ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

std::vector<TcpNudge> NudgeStuckTcpConnections(const TcpNudgeFilter& filter) {
  std::vector<TcpNudge> nudges;
  for (TcpConnectionState& c : ListTcpConnections(filter)) {
    if (!LooksStuck(c)) continue;
    absl::Status status = ResetCongestionControl(c.fd, c.congestion_control);
    nudges.push_back({std::move(c), std::move(status)});
  }
  return nudges;
}

std::string DescribeNudges(const std::vector<TcpNudge>& nudges) {
  if (nudges.empty()) return "";
  std::vector<std::string> each;
  for (const TcpNudge& n : nudges) {
    const TcpConnectionState& c = n.before;
    std::string text = absl::StrCat(c.local, " -> ", c.peer, " (", c.congestion_control, ", ",
                                    c.lost, " of ", c.unacked,
                                    " unacknowledged segments lost, paced at ",
                                    Rate(c.pacing_rate), ")");
    if (!n.status.ok()) absl::StrAppend(&text, ": ", n.status.message());
    each.push_back(std::move(text));
  }
  return absl::StrCat("reset the congestion control of ", nudges.size(), " stuck TCP connection",
                      nudges.size() == 1 ? "" : "s", ": ", absl::StrJoin(each, "; "));
}

}  // namespace p3
