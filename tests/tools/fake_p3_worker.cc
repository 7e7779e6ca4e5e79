// A stand-in for //worker:p3_worker implementing its command-line contract
// (docs/launcher.md), for testing //tools:launch_cluster without training anything.
//
//   fake_p3_worker --config=<config> --rank=<r> --servers=<host:port,...>
//                  --result_file=<path> --records_file=<csv path> [--trace_file=<path>]
//
// Connects to every server (retrying until cluster.peer_timeout_s), "trains" training.iterations
// iterations (10 when 0) printing the contract's PROGRESS lines every training.log_every
// iterations, writes the records CSV and the result JSON, tells every server "done <rank>", waits
// until the servers close the connection (all workers done), and exits 0. PROGRESS lines carry the
// optional traffic fields sent_mbps= and received_mbps=; with --trace_file it writes a
// tiny Chrome trace (pid 100 + rank).
//
// Fault injection through the environment (test code only):
//   FAKE_P3_WORKER_FAIL_RANK=<r>  that rank prints a few lines, then exits 3;
//   FAKE_P3_WORKER_MODE=hang      every rank waits to be killed after connecting;
//   FAKE_P3_WORKER_ITERATION_MS=<ms>  sleep this long per iteration (to watch progress);
//   FAKE_P3_WORKER_NO_RATES=1     PROGRESS lines without sent_mbps / received_mbps (as
//                                 binaries before those fields printed them).
//   FAKE_P3_WORKER_SLOW_RANK=<r>  that rank computes 30 ms per iteration, the others 10 ms
//                                 and wait 20 ms for it: every records row says 0.03 s,
//                                 the result's forward_wait_seconds 0.02 s per iteration
//                                 on the fast ranks, 0 on the slow one (a straggler).
// The result JSON has forward_wait_seconds (0 without a slow rank). A server that closes
// its connection before the end (it died) makes the worker exit 1 naming it, as
// p3_worker does: it looks once per iteration.
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "p3/base/file_util.h"
#include "p3/base/progress.h"
#include "proto/config.h"
#include "proto/config_options.h"
#include "tests/tools/fake_common.h"

namespace {

using p3::fake::FlagValue;
using p3::fake::NowMicros;

// "address:port" of the local end of a connected socket.
std::string LocalAddress(int fd) {
  sockaddr_storage local{};
  socklen_t size = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) != 0) return "?";
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&local), size, host, sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return absl::StrCat(host, ":", port);
}

int Fail(const std::string& message) {
  std::cerr << "fake_p3_worker: " << message << std::endl;
  return 1;
}

// Connects to "host:port" or "[v6 host]:port"; returns the socket or -1.
int Connect(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return -1;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &result) != 0) return -1;
  const int fd = socket(result->ai_family, SOCK_STREAM, 0);
  const bool ok = fd >= 0 && connect(fd, result->ai_addr, result->ai_addrlen) == 0;
  freeaddrinfo(result);
  if (!ok && fd >= 0) close(fd);
  return ok ? fd : -1;
}

int Run(int argc, char** argv) {
  const std::string config_path = FlagValue(argc, argv, "config");
  const std::string servers_flag = FlagValue(argc, argv, "servers");
  const std::string result_file = FlagValue(argc, argv, "result_file");
  const std::string records_file = FlagValue(argc, argv, "records_file");
  const std::string trace_file = FlagValue(argc, argv, "trace_file");
  const int64_t start_us = NowMicros();
  int rank = -1;
  if (!absl::SimpleAtoi(FlagValue(argc, argv, "rank"), &rank) || rank < 0 || result_file.empty() ||
      records_file.empty()) {
    return Fail(
        "usage: --config=... --rank=<r> --servers=... --result_file=... "
        "--records_file=...");
  }
  absl::StatusOr<p3::config::ExperimentConfig> config = p3::config::LoadConfig(config_path, {});
  if (!config.ok()) return Fail(std::string(config.status().message()));
  if (rank >= p3::config::WorkerProcessCount(*config)) return Fail("--rank out of range");
  // What the process would use (the launcher's automatic choice, docs/simulator.md).
  std::cout << "fake_p3_worker " << rank << ": scheduling slice_params "
            << config->scheduling().slice_params() << " credit_bytes "
            << config->scheduling().credit_bytes() << std::endl;

  std::vector<std::string> servers;
  if (!servers_flag.empty()) servers = absl::StrSplit(servers_flag, ',');
  if (static_cast<int>(servers.size()) != p3::config::ServerProcessCount(*config)) {
    return Fail(absl::StrCat("expected ", p3::config::ServerProcessCount(*config),
                             " servers, got --servers=", servers_flag));
  }
  std::vector<int> connections;
  // Like the real worker, wait up to cluster.peer_timeout_s for a server to listen (with
  // fixed ports, workers may start before the servers).
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(config->cluster().peer_timeout_s());
  for (const std::string& server : servers) {
    int fd = Connect(server);
    while (fd < 0 && std::chrono::steady_clock::now() < deadline) {
      usleep(50 * 1000);
      fd = Connect(server);
    }
    if (fd < 0) return Fail("cannot connect to server " + server);
    std::cout << "fake_p3_worker " << rank << ": " << LocalAddress(fd) << " -> " << server
              << std::endl;
    connections.push_back(fd);
  }
  std::cout << "fake_p3_worker " << rank << " connected to " << servers.size() << " servers"
            << std::endl;

  const char* mode = std::getenv("FAKE_P3_WORKER_MODE");
  if (mode != nullptr && std::string(mode) == "hang") {
    while (true) pause();
  }
  int fail_rank = -1;
  const char* fail_env = std::getenv("FAKE_P3_WORKER_FAIL_RANK");
  if (fail_env != nullptr && absl::SimpleAtoi(fail_env, &fail_rank) && fail_rank == rank) {
    std::cout << p3::FormatProgressLine({.iteration = 1, .total = 10, .loss = 2.3}) << std::endl;
    std::cerr << "fake_p3_worker: injected failure on rank " << rank << std::endl;
    return 3;
  }

  const int64_t total = config->training().iterations() > 0 ? config->training().iterations() : 10;
  const int64_t global_batch = p3::config::GlobalBatchSize(*config);
  int slow_rank = -1;
  const char* slow_env = std::getenv("FAKE_P3_WORKER_SLOW_RANK");
  if (slow_env != nullptr) absl::SimpleAtoi(slow_env, &slow_rank);
  const double iteration_seconds = slow_rank >= 0 ? 0.03 : 0.01;
  const double compute_seconds = slow_rank < 0 || slow_rank == rank ? iteration_seconds : 0.01;
  const double samples_per_second = global_batch / iteration_seconds;
  std::string records = "iteration,loss,iteration_seconds,samples_per_second\n";
  double loss = 0;
  const char* iteration_ms_env = std::getenv("FAKE_P3_WORKER_ITERATION_MS");
  int iteration_ms = 0;
  if (iteration_ms_env != nullptr) absl::SimpleAtoi(iteration_ms_env, &iteration_ms);
  const bool rates = std::getenv("FAKE_P3_WORKER_NO_RATES") == nullptr;
  for (int64_t i = 1; i <= total; ++i) {
    if (iteration_ms > 0) usleep(iteration_ms * 1000);
    // The servers send nothing before the end: a readable connection has closed.
    for (size_t s = 0; s < connections.size(); ++s) {
      pollfd pfd{connections[s], POLLIN, 0};
      if (poll(&pfd, 1, 0) > 0) {
        std::cerr << "fake_p3_worker " << rank << ": lost server " << s << " (" << servers[s]
                  << "): connection closed in iteration " << i << std::endl;
        return 1;
      }
    }
    loss = 2.3 * std::exp(-static_cast<double>(i) / total);
    absl::StrAppendFormat(&records, "%d,%.6f,%.6f,%.3f\n", i, loss, iteration_seconds,
                          samples_per_second);
    if (i % config->training().log_every() == 0 || i == total) {
      p3::ProgressLine progress;
      progress.iteration = i;
      progress.total = total;
      progress.loss = loss;
      progress.samples_per_second = samples_per_second;
      // Fixed figures the test can look for: 250 Mbit/s out, 125 in per rank.
      if (rates) {
        progress.sent_mbps = 250;
        progress.received_mbps = 125;
      }
      std::cout << p3::FormatProgressLine(progress) << std::endl;
    }
  }
  if (absl::Status s = p3::WriteFileAtomically(records_file, records); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  // Rank 0 "saves the model" where p3_worker would (a placeholder file, named in the result).
  std::string model_json;
  if (const std::string model = p3::ModelFileFromConfig(*config); rank == 0 && !model.empty()) {
    std::error_code error;
    const std::filesystem::path path = std::filesystem::absolute(model, error);
    std::filesystem::create_directories(path.parent_path(), error);
    if (absl::Status s = p3::WriteFileAtomically(path.string(), "fake model\n"); !s.ok()) {
      return Fail(std::string(s.message()));
    }
    model_json = absl::StrCat(", \"model_file\": \"", path.string(), "\"");
  }
  const std::string result = absl::StrFormat(
      "{\"rank\": %d, \"iterations\": %d, \"samples_per_second\": %.3f, \"final_loss\": %.6f, "
      "\"test_accuracy\": %s, \"param_l2\": 12.5, \"wall_seconds\": %.3f, "
      "\"forward_wait_seconds\": %.6f%s}\n",
      rank, total, samples_per_second, loss, config->training().evaluate() ? "0.75" : "null",
      total * iteration_seconds, total * (iteration_seconds - compute_seconds), model_json);
  if (absl::Status s = p3::WriteFileAtomically(result_file, result); !s.ok()) {
    return Fail(std::string(s.message()));
  }

  // Tell the servers, then wait until they release everyone.
  const std::string done = absl::StrCat("done ", rank, "\n");
  for (int fd : connections) {
    if (write(fd, done.data(), done.size()) != static_cast<ssize_t>(done.size())) {
      return Fail("cannot reach a server");
    }
  }
  for (int fd : connections) {
    char buffer[64];
    while (read(fd, buffer, sizeof(buffer)) > 0) {
    }
    close(fd);
  }
  if (!trace_file.empty()) {
    const int pid = 100 + rank;
    const int64_t now = NowMicros();
    const std::string trace = absl::StrFormat(
        "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"dropped_events\": 0}, "
        "\"traceEvents\": [\n"
        "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, "
        "\"args\": {\"name\": \"worker %d\"}},\n"
        "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": 0, "
        "\"args\": {\"name\": \"compute\"}},\n"
        "{\"ph\": \"X\", \"pid\": %d, \"tid\": 0, \"ts\": %d, \"dur\": %d, "
        "\"name\": \"forward block 0\", \"cat\": \"compute\"},\n"
        "{\"ph\": \"X\", \"pid\": %d, \"tid\": 0, \"ts\": %d, \"dur\": %d, "
        "\"name\": \"backward block 0\", \"cat\": \"compute\"}\n]}\n",
        pid, rank, pid, pid, start_us, (now - start_us) / 2, pid, start_us + (now - start_us) / 2,
        (now - start_us) / 2);
    if (absl::Status s = p3::WriteFileAtomically(trace_file, trace); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  std::cout << "fake_p3_worker " << rank << " finished" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
