#include "p3/base/tcp_nudge.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tests/testing/skip.h"

namespace p3 {
namespace {

TcpConnectionState Stuck() {
  TcpConnectionState c;
  c.local = "10.77.0.2:44538";
  c.peer = "10.77.0.3:34359";
  c.local_port = 44538;
  c.remote_port = 34359;
  c.state = 1;
  c.ca_state = 4;
  c.unacked = 198;
  c.lost = 196;
  c.pacing_rate = 1708;  // 13664 bit/s, as ss showed it in the stalled trial
  c.congestion_control = "bbr";
  return c;
}

// A TCP connection over 127.0.0.1: the connecting end, the accepted end, the server port.
struct Loopback {
  int client = -1;
  int server = -1;
  int port = 0;
  Loopback() {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    CATCH_REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&address), size) == 0);
    CATCH_REQUIRE(listen(listener, 1) == 0);
    CATCH_REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    port = ntohs(address.sin_port);
    client = socket(AF_INET, SOCK_STREAM, 0);
    CATCH_REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&address), size) == 0);
    server = accept(listener, nullptr, nullptr);
    CATCH_REQUIRE(server >= 0);
    close(listener);
  }
  ~Loopback() {
    close(client);
    close(server);
  }
};

// BBR's bandwidth estimate of `fd` in bytes/s (TCP_CC_INFO), or -1 when it has none.
int64_t BbrBandwidth(int fd) {
  tcp_cc_info info{};
  socklen_t size = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_CC_INFO, &info, &size) != 0 ||
      size < sizeof(info.bbr)) {
    return -1;
  }
  return (int64_t{info.bbr.bbr_bw_hi} << 32) | info.bbr.bbr_bw_lo;
}

CATCH_TEST_CASE("a connection is stuck when data it holds is paced below 100 kbit/s") {
  CATCH_CHECK(LooksStuck(Stuck()));
  TcpConnectionState c = Stuck();
  c.lost = 0;  // still paced at 13.7 kbit/s
  CATCH_CHECK(LooksStuck(c));
  c.pacing_rate = kSlowPacing;  // 100 kbit/s
  CATCH_CHECK_FALSE(LooksStuck(c));
  c.pacing_rate = 125000;  // a 1 Mbit/s brownout, at the link's rate: not stuck
  c.lost = 5;
  c.backoff = 2;  // a retransmission timeout backed off: a reset would not shorten it
  CATCH_CHECK_FALSE(LooksStuck(c));
  c.pacing_rate = 0;  // no pacing rate known
  CATCH_CHECK_FALSE(LooksStuck(c));
  c = Stuck();
  c.unacked = 0;  // nothing to deliver: waits for its peer
  CATCH_CHECK_FALSE(LooksStuck(c));
  c.notsent = 100;  // bytes queued behind the slow pacing
  CATCH_CHECK(LooksStuck(c));
  c = Stuck();
  c.state = 8;  // closing
  CATCH_CHECK_FALSE(LooksStuck(c));
}

CATCH_TEST_CASE("a server's connections are picked by local port, a worker's by remote port") {
  const TcpConnectionState c = Stuck();
  CATCH_CHECK(Matches({.local_ports = {44538}}, c));
  CATCH_CHECK(Matches({.remote_ports = {7070, 34359}}, c));
  CATCH_CHECK_FALSE(Matches({.local_ports = {34359}}, c));
  CATCH_CHECK_FALSE(Matches({}, c));
}

CATCH_TEST_CASE("the servers' ports come from their host:port addresses") {
  CATCH_CHECK(PortsOf({"10.0.0.1:7070", "[::1]:7071", "localhost", "h:0", "h:x"}) ==
              std::vector<int>{7070, 7071});
}

CATCH_TEST_CASE("a nudge is described with the connection, its loss and its pacing rate") {
  CATCH_CHECK(DescribeNudges({}).empty());
  CATCH_CHECK(DescribeNudges({{Stuck(), absl::OkStatus()}}) ==
              "reset the congestion control of 1 stuck TCP connection: 10.77.0.2:44538 -> "
              "10.77.0.3:34359 (bbr, 196 of 198 unacknowledged segments lost, paced at 13.7 "
              "kbit/s)");
  const std::string two = DescribeNudges(
      {{Stuck(), absl::OkStatus()}, {Stuck(), absl::InternalError("no reno")}});
  CATCH_CHECK(two.rfind("reset the congestion control of 2 stuck TCP connections: ", 0) == 0);
  CATCH_CHECK(two.find("kbit/s): no reno") != std::string::npos);
}

CATCH_TEST_CASE("the process's own connections are listed by port, a healthy one is left alone") {
  Loopback link;
  const std::string port = std::to_string(link.port);
  std::vector<TcpConnectionState> mine = ListTcpConnections({.remote_ports = {link.port}});
  CATCH_REQUIRE(mine.size() == 1);
  CATCH_CHECK(mine[0].fd == link.client);
  CATCH_CHECK(mine[0].peer == "127.0.0.1:" + port);
  CATCH_CHECK(mine[0].state == 1);
  CATCH_CHECK_FALSE(mine[0].congestion_control.empty());
  // The server's end: by its local port (the listener, closed, or unconnected, is not one).
  mine = ListTcpConnections({.local_ports = {link.port}});
  CATCH_REQUIRE(mine.size() == 1);
  CATCH_CHECK(mine[0].fd == link.server);
  CATCH_CHECK(mine[0].local == "127.0.0.1:" + port);
  CATCH_CHECK(ListTcpConnections({}).empty());
  CATCH_CHECK(NudgeStuckTcpConnections({.remote_ports = {link.port}}).empty());
}

CATCH_TEST_CASE("a reset keeps the congestion control and starts its estimates afresh") {
  Loopback link;
  const char bbr[] = "bbr";
  if (setsockopt(link.client, IPPROTO_TCP, TCP_CONGESTION, bbr, 3) != 0) {
    testing::ReportSkip("the BBR reset case", "this kernel has no bbr");
    return;
  }
  // BBR measures the loopback's bandwidth while 4 MB go through.
  std::vector<char> data(1 << 20, 'p');
  for (int i = 0; i < 4; ++i) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(link.client, data.data() + sent, data.size() - sent, 0);
      CATCH_REQUIRE(n > 0);
      sent += static_cast<size_t>(n);
      for (ssize_t got = 0; got < n;) {
        const ssize_t r = recv(link.server, data.data(), std::min<size_t>(n - got, data.size()), 0);
        CATCH_REQUIRE(r > 0);
        got += r;
      }
    }
  }
  CATCH_CHECK(BbrBandwidth(link.client) > 0);
  CATCH_CHECK(ResetCongestionControl(link.client, "bbr").ok());
  CATCH_CHECK(BbrBandwidth(link.client) == 0);
  std::vector<TcpConnectionState> mine = ListTcpConnections({.remote_ports = {link.port}});
  CATCH_REQUIRE(mine.size() == 1);
  CATCH_CHECK(mine[0].congestion_control == "bbr");
  // Reno keeps no estimate: nothing to do.
  CATCH_CHECK(ResetCongestionControl(link.client, "reno").ok());
}

}  // namespace
}  // namespace p3
