#include "tools/launcher/netem.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "p3/base/status_macros.h"

namespace p3::tools {
namespace {

constexpr char kNetnsDir[] = "/var/run/netns";

struct Subnet {
  uint32_t network = 0;  // Host byte order.
  int prefix = 0;
};

absl::StatusOr<Subnet> ParseSubnet(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '/');
  in_addr address{};
  int prefix = -1;
  if (parts.size() != 2 || inet_pton(AF_INET, parts[0].c_str(), &address) != 1 ||
      !absl::SimpleAtoi(parts[1], &prefix) || prefix < 8 || prefix > 30) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not an IPv4 subnet a.b.c.d/len with len in 8..30, e.g. 10.77.0.0/24"));
  }
  const uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  return Subnet{ntohl(address.s_addr) & mask, prefix};
}

std::string FormatAddress(uint32_t host_order) {
  in_addr address{};
  address.s_addr = htonl(host_order);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &address, text, sizeof(text));
  return text;
}

std::string CommandLine(const std::vector<std::string>& argv) { return absl::StrJoin(argv, " "); }

int64_t MonotonicNanos() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

// Reads exactly `size` bytes from `fd`, waiting at most until `deadline_ns` (monotonic).
bool ReadWithDeadline(int fd, void* data, size_t size, int64_t deadline_ns) {
  char* out = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    const int64_t left_ms = (deadline_ns - MonotonicNanos()) / 1000000;
    if (left_ms <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void WriteAll(int fd, const void* data, size_t size) {
  const char* in = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, in, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    in += n;
    size -= static_cast<size_t>(n);
  }
}

// Common start of a measurement child: dies with the parent, signals back to default.
void PrepareChild() {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

sockaddr_in SocketAddress(const std::string& address, uint16_t port) {
  sockaddr_in out{};
  out.sin_family = AF_INET;
  out.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &out.sin_addr);
  return out;
}

struct ReceiverReport {
  int32_t error = 0;  // errno of the failing step, or -1 for a timeout.
  int32_t step = 0;   // 1 setns, 2 socket/bind/listen, 3 accept, 4 read.
  int64_t bytes = 0;
  int64_t nanos = 0;
};

// The receiver child's end: its report (`step` failed with errno `error`, or 0) to
// `report_fd`, then the exit.
[[noreturn]] void FinishReceiver(ReceiverReport report, int report_fd, int step, int error) {
  report.step = step;
  report.error = error;
  WriteAll(report_fd, &report, sizeof(report));
  _exit(error == 0 ? 0 : 1);
}

// Receiver child: listens on `address` in namespace `ns_path`, reports its port on
// `port_fd`, counts the bytes of one connection until EOF, reports on `report_fd`.
[[noreturn]] void RunReceiver(const std::string& ns_path, const std::string& address, int port_fd,
                              int report_fd, int64_t deadline_ns) {
  PrepareChild();
  ReceiverReport report;
  auto finish = [&](int step, int error) { FinishReceiver(report, report_fd, step, error); };
  int error = EnterNamespace(ns_path.c_str());
  if (error != 0) {
    uint16_t zero = 0;
    WriteAll(port_fd, &zero, sizeof(zero));
    finish(1, error);
  }
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in bind_address = SocketAddress(address, 0);
  if (listener < 0 ||
      bind(listener, reinterpret_cast<sockaddr*>(&bind_address), sizeof(bind_address)) != 0 ||
      listen(listener, 1) != 0) {
    error = errno;
    uint16_t zero = 0;
    WriteAll(port_fd, &zero, sizeof(zero));
    finish(2, error);
  }
  sockaddr_in bound{};
  socklen_t bound_size = sizeof(bound);
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &bound_size);
  const uint16_t port = ntohs(bound.sin_port);
  WriteAll(port_fd, &port, sizeof(port));

  pollfd pfd{listener, POLLIN, 0};
  const int64_t wait_ms = (deadline_ns - MonotonicNanos()) / 1000000;
  if (wait_ms <= 0 || poll(&pfd, 1, static_cast<int>(wait_ms)) <= 0) finish(3, -1);
  const int connection = accept(listener, nullptr, nullptr);
  if (connection < 0) finish(3, errno);
  std::vector<char> buffer(1 << 18);
  int64_t start = 0;
  while (true) {
    pfd = {connection, POLLIN, 0};
    const int64_t left_ms = (deadline_ns - MonotonicNanos()) / 1000000;
    if (left_ms <= 0 || poll(&pfd, 1, static_cast<int>(left_ms)) <= 0) finish(4, -1);
    const ssize_t n = read(connection, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) finish(4, errno);
    if (n == 0) break;
    if (start == 0) start = MonotonicNanos();
    report.bytes += n;
  }
  report.nanos = start == 0 ? 0 : MonotonicNanos() - start;
  FinishReceiver(report, report_fd, 0, 0);
}

// Sender child: connects from namespace `ns_path` to address:port and sends for
// `duration_ns`.
[[noreturn]] void RunSender(const std::string& ns_path, const std::string& address, uint16_t port,
                            int64_t duration_ns) {
  PrepareChild();
  if (EnterNamespace(ns_path.c_str()) != 0) _exit(1);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in target = SocketAddress(address, port);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) _exit(2);
  timeval timeout{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::vector<char> buffer(1 << 17, 'p');
  const int64_t end = MonotonicNanos() + duration_ns;
  while (MonotonicNanos() < end) {
    const ssize_t n = send(fd, buffer.data(), buffer.size(), MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR && errno != EAGAIN) _exit(3);
  }
  close(fd);
  _exit(0);
}

void KillAndReap(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::string RunIdForPid(pid_t pid) { return absl::StrCat("p3-", pid); }

std::string SubnetProblem(const std::string& subnet) {
  absl::StatusOr<Subnet> parsed = ParseSubnet(subnet);
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

absl::StatusOr<std::vector<std::string>> MachineAddresses(const std::string& subnet, int machines) {
  P3_ASSIGN_OR_RETURN(const Subnet parsed, ParseSubnet(subnet));
  const int64_t hosts = (int64_t{1} << (32 - parsed.prefix)) - 2;
  if (machines < 1 || machines > hosts) {
    return absl::InvalidArgumentError(
        absl::StrCat("subnet ", subnet, " has room for ", hosts, " machines, not ", machines));
  }
  std::vector<std::string> addresses;
  for (int i = 0; i < machines; ++i) {
    addresses.push_back(FormatAddress(parsed.network + static_cast<uint32_t>(i) + 1));
  }
  return addresses;
}

std::string MachineNamespace(const std::string& run_id, int machine) {
  return absl::StrCat(run_id, "-m", machine);
}

std::string BridgeNamespace(const std::string& run_id) { return run_id + "-br"; }

int64_t EffectiveBurstBytes(const NetworkSpec& spec) {
  if (spec.burst_bytes > 0) return spec.burst_bytes;
  // tbf needs a bucket of at least one timer tick's worth of bytes to reach its rate;
  // 128 KiB was measured to give 0.957 Gbit/s goodput on 1 Gbit/s (docs/network.md).
  const double per_millisecond = spec.rate_bits_per_second / 8 / 1000;
  return std::max<int64_t>(128 * 1024, static_cast<int64_t>(std::ceil(per_millisecond)));
}

absl::StatusOr<std::vector<std::vector<std::string>>> NetworkCommands(const NetworkSpec& spec) {
  P3_ASSIGN_OR_RETURN(const std::vector<std::string> addresses,
                      MachineAddresses(spec.subnet, spec.machines));
  if (!(spec.rate_bits_per_second >= 0) || std::isinf(spec.rate_bits_per_second)) {
    return absl::InvalidArgumentError("the link rate must be a finite number >= 0");
  }
  const int prefix_length = ParseSubnet(spec.subnet)->prefix;
  const std::string bridge = BridgeNamespace(spec.run_id);
  std::vector<std::vector<std::string>> commands = {
      {"ip", "netns", "add", bridge},
      {"ip", "-n", bridge, "link", "add", "br0", "type", "bridge"},
      {"ip", "-n", bridge, "link", "set", "br0", "up"},
  };
  std::vector<std::string> tbf;
  if (spec.rate_bits_per_second > 0) {
    tbf = {"root",
           "tbf",
           "rate",
           absl::StrFormat("%.0fbit", spec.rate_bits_per_second),
           "burst",
           absl::StrCat(EffectiveBurstBytes(spec)),
           "latency",
           absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(spec.latency)), "ms")};
  }
  for (int i = 0; i < spec.machines; ++i) {
    const std::string ns = MachineNamespace(spec.run_id, i);
    const std::string port = absl::StrCat("m", i);
    std::vector<std::vector<std::string>> machine = {
        {"ip", "netns", "add", ns},
        {"ip", "-n", ns, "link", "set", "lo", "up"},
        {"ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns",
         bridge},
        {"ip", "-n", ns, "addr", "add", absl::StrCat(addresses[i], "/", prefix_length), "dev",
         "eth0"},
        {"ip", "-n", ns, "link", "set", "eth0", "up"},
        {"ip", "-n", bridge, "link", "set", port, "master", "br0"},
        {"ip", "-n", bridge, "link", "set", port, "up"},
    };
    if (spec.tcp_notsent_lowat > 0) {
      machine.push_back({"ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                         absl::StrCat("net.ipv4.tcp_notsent_lowat=", spec.tcp_notsent_lowat)});
    }
    if (!spec.congestion_control.empty()) {
      machine.push_back({"ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                         absl::StrCat("net.ipv4.tcp_congestion_control=", spec.congestion_control)});
    }
    if (!tbf.empty()) {
      std::vector<std::string> upload = {"tc", "-n", ns, "qdisc", "add", "dev", "eth0"};
      upload.insert(upload.end(), tbf.begin(), tbf.end());
      std::vector<std::string> download = {"tc", "-n", bridge, "qdisc", "add", "dev", port};
      download.insert(download.end(), tbf.begin(), tbf.end());
      machine.push_back(upload);
      machine.push_back(download);
    }
    commands.insert(commands.end(), machine.begin(), machine.end());
  }
  return commands;
}

absl::Status RunCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<std::string> args = argv;
  std::vector<char*> ptrs;
  for (std::string& arg : args) ptrs.push_back(arg.data());
  ptrs.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(err_pipe[0]);
    close(err_pipe[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      dup2(null_fd, STDOUT_FILENO);
    }
    dup2(err_pipe[1], STDERR_FILENO);
    execvp(ptrs[0], ptrs.data());
    const char message[] = "cannot execute the command (is iproute2 installed?)\n";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    _exit(127);
  }
  close(err_pipe[1]);
  std::string err;
  char buffer[1024];
  ssize_t n;
  while ((n = read(err_pipe[0], buffer, sizeof(buffer))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    err.append(buffer, static_cast<size_t>(n));
  }
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  const std::string how = WIFEXITED(status)
                              ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                              : absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::InternalError(
      absl::StrCat("`", CommandLine(argv), "` ", how, ": ", absl::StripAsciiWhitespace(err)));
}

std::vector<std::string> ListNamespaces() {
  std::vector<std::string> names;
  DIR* dir = opendir(kNetnsDir);
  if (dir == nullptr) return names;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> StaleNamespaces(const std::vector<std::string>& names,
                                         const std::function<bool(pid_t)>& alive) {
  std::vector<std::string> stale;
  for (const std::string& name : names) {
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, "p3-")) continue;
    const size_t dash = rest.find('-');
    if (dash == absl::string_view::npos) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(rest.substr(0, dash), &pid) || pid <= 0) continue;
    const absl::string_view kind = rest.substr(dash + 1);
    if (kind != "br" && !(absl::StartsWith(kind, "m") && kind.size() > 1)) continue;
    if (!alive(pid)) stale.push_back(name);
  }
  return stale;
}

bool ProcessAlive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

absl::Status DeleteNamespace(const std::string& name, const CommandRunner& run) {
  return run({"ip", "netns", "delete", name});
}

int EnterNamespace(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int result = setns(fd, CLONE_NEWNET);
  const int error = result == 0 ? 0 : errno;
  close(fd);
  return error;
}

EmulatedNetwork::EmulatedNetwork(NetworkSpec spec, std::vector<std::string> addresses,
                                 CommandRunner run)
    : spec_(std::move(spec)), addresses_(std::move(addresses)), run_(std::move(run)) {}

EmulatedNetwork::~EmulatedNetwork() { Destroy().IgnoreError(); }

absl::StatusOr<BenchmarkLink> MakeBenchmarkLink(double gbps) {
  BenchmarkLink link;
  if (gbps <= 0) return link;
  NetworkSpec spec;
  spec.run_id = RunIdForPid(getpid());
  spec.machines = 2;
  spec.rate_bits_per_second = gbps * 1e9;
  P3_ASSIGN_OR_RETURN(link.net, EmulatedNetwork::Create(spec));
  link.host = link.net->address(1);
  link.server_ns = link.net->namespace_path(1);
  link.client_ns = link.net->namespace_path(0);
  return link;
}

absl::StatusOr<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(const NetworkSpec& spec) {
  if (geteuid() != 0) {
    return absl::PermissionDeniedError(
        "emulating the network needs root: it creates network namespaces, veth links and tbf "
        "qdiscs (run the launcher as root, e.g. with sudo)");
  }
  return CreateWithRunner(spec, RunCommand);
}

absl::StatusOr<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::CreateWithRunner(
    const NetworkSpec& spec, CommandRunner run) {
  P3_ASSIGN_OR_RETURN(const std::vector<std::vector<std::string>> commands, NetworkCommands(spec));
  absl::StatusOr<std::vector<std::string>> addresses = MachineAddresses(spec.subnet, spec.machines);
  std::unique_ptr<EmulatedNetwork> network(
      new EmulatedNetwork(spec, *std::move(addresses), std::move(run)));
  for (const std::vector<std::string>& command : commands) {
    absl::Status status = network->run_(command);
    if (!status.ok()) {
      network->Destroy().IgnoreError();
      return absl::Status(status.code(),
                          absl::StrCat("cannot set up the emulated network: ", status.message()));
    }
    if (command.size() == 4 && command[0] == "ip" && command[1] == "netns" && command[2] == "add") {
      network->created_.push_back(command[3]);
    }
  }
  return network;
}

absl::Status EmulatedNetwork::Destroy() {
  absl::Status first;
  // Machines first, then the bridge: reverse order of creation.
  while (!created_.empty()) {
    absl::Status status = DeleteNamespace(created_.back(), run_);
    if (!status.ok() && first.ok()) first = status;
    created_.pop_back();
  }
  return first;
}

std::string EmulatedNetwork::namespace_name(int machine) const {
  return MachineNamespace(spec_.run_id, machine);
}

std::string EmulatedNetwork::namespace_path(int machine) const {
  return absl::StrCat(kNetnsDir, "/", namespace_name(machine));
}

absl::StatusOr<LinkMeasurement> MeasureLink(const EmulatedNetwork& network, int from, int to,
                                            absl::Duration duration) {
  if (from < 0 || to < 0 || from >= network.machines() || to >= network.machines() || from == to) {
    return absl::InvalidArgumentError(
        absl::StrCat("no link from machine ", from, " to machine ", to));
  }
  const int64_t duration_ns = absl::ToInt64Nanoseconds(duration);
  const int64_t deadline_ns = MonotonicNanos() + duration_ns + int64_t{10} * 1000000000;
  int port_pipe[2];
  int report_pipe[2];
  if (pipe2(port_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  if (pipe2(report_pipe, O_CLOEXEC) != 0) {
    close(port_pipe[0]);
    close(port_pipe[1]);
    return absl::InternalError("pipe failed");
  }
  const std::string to_path = network.namespace_path(to);
  const std::string from_path = network.namespace_path(from);
  const std::string address = network.address(to);
  const pid_t receiver = fork();
  if (receiver == 0) {
    close(port_pipe[0]);
    close(report_pipe[0]);
    RunReceiver(to_path, address, port_pipe[1], report_pipe[1], deadline_ns);
  }
  close(port_pipe[1]);
  close(report_pipe[1]);
  auto fail = [&](const std::string& what, pid_t sender) -> absl::Status {
    KillAndReap(sender);
    KillAndReap(receiver);
    close(port_pipe[0]);
    close(report_pipe[0]);
    return absl::InternalError(
        absl::StrCat("measuring machine ", from, " -> machine ", to, " (", address, "): ", what));
  };
  if (receiver < 0) return fail(absl::StrCat("fork: ", std::strerror(errno)), -1);
  uint16_t port = 0;
  if (!ReadWithDeadline(port_pipe[0], &port, sizeof(port), MonotonicNanos() + 10000000000) ||
      port == 0) {
    ReceiverReport report;
    std::string why = "the receiver did not start";
    if (ReadWithDeadline(report_pipe[0], &report, sizeof(report), MonotonicNanos() + 1000000000)) {
      why = absl::StrCat("the receiver failed (step ", report.step,
                         "): ", std::strerror(report.error));
    }
    return fail(why, -1);
  }
  const pid_t sender = fork();
  if (sender == 0) {
    close(port_pipe[0]);
    close(report_pipe[0]);
    RunSender(from_path, address, port, duration_ns);
  }
  if (sender < 0) return fail(absl::StrCat("fork: ", std::strerror(errno)), -1);
  ReceiverReport report;
  if (!ReadWithDeadline(report_pipe[0], &report, sizeof(report), deadline_ns)) {
    return fail("no result before the deadline", sender);
  }
  int sender_status = 0;
  waitpid(sender, &sender_status, 0);
  int receiver_status = 0;
  waitpid(receiver, &receiver_status, 0);
  close(port_pipe[0]);
  close(report_pipe[0]);
  if (report.error != 0) {
    return absl::InternalError(absl::StrCat(
        "measuring machine ", from, " -> machine ", to, ": the receiver failed (step ", report.step,
        "): ", report.error < 0 ? "timed out" : std::strerror(report.error)));
  }
  if (!WIFEXITED(sender_status) || WEXITSTATUS(sender_status) != 0) {
    return absl::InternalError(absl::StrCat("measuring machine ", from, " -> machine ", to,
                                            ": the sender failed (status ", sender_status, ")"));
  }
  LinkMeasurement m;
  m.from = from;
  m.to = to;
  m.bytes = report.bytes;
  m.seconds = static_cast<double>(report.nanos) / 1e9;
  m.gbps = m.seconds > 0 ? static_cast<double>(m.bytes) * 8 / m.seconds / 1e9 : 0;
  return m;
}

std::vector<std::pair<int, int>> RingLinks(int machines) {
  std::vector<std::pair<int, int>> links;
  if (machines < 2) return links;
  for (int i = 0; i < machines; ++i) links.emplace_back(i, (i + 1) % machines);
  return links;
}

}  // namespace p3::tools
