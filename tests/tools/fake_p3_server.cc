// A stand-in for //server:p3_server implementing its command-line contract
// (docs/launcher.md), for testing //tools:launch_cluster without training anything.
//
//   fake_p3_server --config=<config> --server_index=<i> --port_file=<path>
//                  [--port=<p>] [--trace_file=<path>] [--set=field.path=value ...]
//
// Binds cluster.host (after the --set overrides) on --port or an OS-chosen port,
// publishes it atomically in port_file (when given), then
// accepts worker connections; each worker sends "done <rank>\n" when finished. When
// cluster.workers workers have said done, it closes their connections (releasing them)
// and exits 0, writing a tiny Chrome trace (pid 200 + index) to --trace_file when given.
// A worker that disconnects without "done" is ignored: the launcher is the
// one that notices the worker's failure and stops this process.
//
// Fault injection through the environment (test code only):
//   FAKE_P3_SERVER_MODE=fail     exit 1 with a message before binding;
//   FAKE_P3_SERVER_MODE=no_port  bind but never write the port file; wait to be killed.
//   FAKE_P3_SERVER_IGNORE_SIGTERM=1  ignore SIGTERM (only SIGKILL stops it).
//   FAKE_P3_SERVER_DIE_INDEX=<i>  server i kills itself with SIGKILL
//                                 FAKE_P3_SERVER_DIE_AFTER_MS (default 200) after every
//                                 worker has connected: a server dying mid-run.
//   FAKE_P3_SERVER_ABORT_ON_DISCONNECT=1  like p3_server, a worker disconnecting without
//                                 "done" ends the run: a message, then exit 1.
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "p3/base/file_util.h"
#include "proto/config.h"
#include "tests/tools/fake_common.h"

namespace {

using p3::fake::FlagValue;
using p3::fake::NowMicros;

int Fail(const std::string& message) {
  std::cerr << "fake_p3_server: " << message << std::endl;
  return 1;
}

int Run(int argc, char** argv) {
  const std::vector<std::string> overrides = p3::config::TakeOverrideFlags(&argc, argv);
  const std::string config_path = FlagValue(argc, argv, "config");
  const std::string port_file = FlagValue(argc, argv, "port_file");
  int index = -1;
  const std::string port_flag = FlagValue(argc, argv, "port");
  const std::string trace_file = FlagValue(argc, argv, "trace_file");
  int fixed_port = 0;
  if (!absl::SimpleAtoi(FlagValue(argc, argv, "server_index"), &index) || index < 0 ||
      (port_file.empty() && port_flag.empty()) ||
      (!port_flag.empty() && !absl::SimpleAtoi(port_flag, &fixed_port))) {
    return Fail("usage: --config=... --server_index=<i> --port_file=<path> [--port=<p>]");
  }
  const int64_t start_us = NowMicros();
  absl::StatusOr<p3::config::ExperimentConfig> config =
      p3::config::LoadConfig(config_path, overrides);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  if (index >= config->cluster().servers()) return Fail("--server_index out of range");
  // What the process would use (the launcher's automatic choice, docs/simulator.md).
  std::cout << "fake_p3_server " << index << ": scheduling slice_params "
            << config->scheduling().slice_params() << " credit_bytes "
            << config->scheduling().credit_bytes() << std::endl;

  if (std::getenv("FAKE_P3_SERVER_IGNORE_SIGTERM") != nullptr) signal(SIGTERM, SIG_IGN);
  const char* mode_env = std::getenv("FAKE_P3_SERVER_MODE");
  const std::string mode = mode_env != nullptr ? mode_env : "ok";
  if (mode == "fail") return Fail("injected failure (FAKE_P3_SERVER_MODE=fail)");

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* address = nullptr;
  if (getaddrinfo(config->cluster().host().c_str(), std::to_string(fixed_port).c_str(), &hints,
                  &address) != 0) {
    return Fail("cannot resolve cluster.host " + config->cluster().host());
  }
  const int listener = socket(address->ai_family, SOCK_STREAM, 0);
  const int reuse = 1;
  if (listener >= 0) setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
  if (listener < 0 || bind(listener, address->ai_addr, address->ai_addrlen) != 0 ||
      listen(listener, 64) != 0) {
    return Fail(
        absl::StrCat("cannot listen on ", config->cluster().host(), ": ", std::strerror(errno)));
  }
  freeaddrinfo(address);
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &bound_size);
  char port_text[NI_MAXSERV];
  getnameinfo(reinterpret_cast<sockaddr*>(&bound), bound_size, nullptr, 0, port_text,
              sizeof(port_text), NI_NUMERICSERV);
  std::cout << "fake_p3_server " << index << " listening on " << config->cluster().host()
            << " port " << port_text << std::endl;

  if (mode == "no_port") {
    std::cout << "not writing the port file (FAKE_P3_SERVER_MODE=no_port)" << std::endl;
    while (true) pause();
  }
  if (!port_file.empty()) {
    const absl::Status written = p3::WriteFileAtomically(port_file, absl::StrCat(port_text, "\n"));
    if (!written.ok()) return Fail(std::string(written.message()));
  }

  int die_index = -1;
  const char* die_env = std::getenv("FAKE_P3_SERVER_DIE_INDEX");
  if (die_env != nullptr) absl::SimpleAtoi(die_env, &die_index);
  int die_after_ms = 200;
  const char* die_after_env = std::getenv("FAKE_P3_SERVER_DIE_AFTER_MS");
  if (die_after_env != nullptr) absl::SimpleAtoi(die_after_env, &die_after_ms);
  const bool abort_on_disconnect = std::getenv("FAKE_P3_SERVER_ABORT_ON_DISCONNECT") != nullptr;
  int connected = 0;
  std::chrono::steady_clock::time_point die_at = std::chrono::steady_clock::time_point::max();

  std::vector<pollfd> fds = {{listener, POLLIN, 0}};
  std::map<int, std::string> received;  // Per connection.
  int done = 0;
  while (done < config->cluster().workers()) {
    int timeout_ms = -1;
    if (die_at != std::chrono::steady_clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          die_at - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        std::cout << "fake_p3_server " << index << ": dying (FAKE_P3_SERVER_DIE_INDEX)"
                  << std::endl;
        raise(SIGKILL);
      }
      timeout_ms = static_cast<int>(left.count()) + 1;
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) return Fail("poll failed");
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buffer[256];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        received[fds[i].fd].append(buffer, n);
        if (absl::StrContains(received[fds[i].fd], "\n")) {
          std::cout << "worker said: " << received[fds[i].fd] << std::flush;
          if (absl::StartsWith(received[fds[i].fd], "done ")) ++done;
          fds[i].events = 0;  // Keep the connection open until everyone is done.
        }
      } else {
        if (abort_on_disconnect) {
          return Fail(absl::StrCat("server ", index,
                                   " aborted the run: a worker disconnected without saying done"));
        }
        std::cout << "a worker disconnected without saying done" << std::endl;
        close(fds[i].fd);
        fds.erase(fds.begin() + i);
        --i;
      }
    }
    if (fds[0].revents & POLLIN) {
      const int connection = accept(listener, nullptr, nullptr);
      if (connection >= 0) {
        fds.push_back({connection, POLLIN, 0});
        if (++connected == config->cluster().workers() && index == die_index) {
          die_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(die_after_ms);
        }
      }
    }
  }
  for (size_t i = 1; i < fds.size(); ++i) close(fds[i].fd);
  std::cout << "all " << done << " workers done; exiting" << std::endl;
  if (!trace_file.empty()) {
    const int pid = 200 + index;
    const std::string trace = absl::StrFormat(
        "{\"traceEvents\": [\n"
        "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, "
        "\"args\": {\"name\": \"server %d\"}},\n"
        "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": 0, "
        "\"args\": {\"name\": \"worker 0 stream\"}},\n"
        "{\"ph\": \"X\", \"pid\": %d, \"tid\": 0, \"ts\": %d, \"dur\": %d, "
        "\"name\": \"serve\", \"cat\": \"server\"}\n]}\n",
        pid, index, pid, pid, start_us, NowMicros() - start_us);
    std::ofstream out(trace_file);
    out << trace;
    if (!out.flush()) return Fail("cannot write " + trace_file);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
