// The two ends of tools:grpc_api_probe (grpc_api_probe_main.cc says what it measures):
// P3's stream pattern, and nothing else, on gRPC's synchronous API or its callback API.
//
//   echo server: one bidirectional stream; each message read is queued and written back as
//     it is, one write in flight, write-through. The synchronous API hands each message
//     from gRPC's handler thread to a writer thread through a queue, as ParameterServer's
//     stream loops do; the callback API reads and writes in reactions.
//   client: the worker's end. Messages of `message_bytes`, zero-copy from one buffer, one
//     write in flight, write-through, in iterations of `iteration_megabytes`: an
//     iteration's messages go once the one before has come back (a P3 worker needs its
//     values before the next iteration's gradients). The synchronous API: a writer thread
//     and a reader thread, as ServerConnection's; the callback API: reactions.
//
// Example (each in its own process; the client measures both):
//   RunEchoServer(/*callback=*/true, "/tmp/port");
//   absl::StatusOr<nlohmann::json> r = RunEchoClient({.target = "127.0.0.1:4242",
//       .callback = true, .server_pid = server_pid});
#ifndef P3_TOOLS_GRPC_API_PROBE_ENDS_H_
#define P3_TOOLS_GRPC_API_PROBE_ENDS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace p3::tools {

// Serves one echo stream on 0.0.0.0 with the API chosen, writing its port to
// `port_file` and "listening on port N" to stderr; returns once the stream has ended.
absl::Status RunEchoServer(bool callback, const std::string& port_file);

struct EchoClientOptions {
  std::string target;  // host:port of the echo server
  bool callback = false;
  int64_t message_bytes = 160'000;  // a 40,000-value slice
  int64_t megabytes = 2000;         // each way, in the window
  int64_t iteration_megabytes = 100;
  pid_t server_pid = 0;  // the server's process, for its CPU and context switches
};

// Opens the stream, sends one message and waits for it (the window opens), then the
// rest. Returns the window's figures: api, message_bytes, messages, iteration_messages,
// seconds, goodput_gbps (each way), client_cpu_s, server_cpu_s, cpu_s_per_gb (both
// processes, per GB of both directions), host_busy_s, host_softirq_s, host_cpu_s_per_gb,
// client_voluntary_switches, server_voluntary_switches, voluntary_switches_per_message.
absl::StatusOr<nlohmann::json> RunEchoClient(const EchoClientOptions& options);

}  // namespace p3::tools

#endif  // P3_TOOLS_GRPC_API_PROBE_ENDS_H_
