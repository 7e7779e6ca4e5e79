// A P3 parameter server: the gRPC edge around a ParameterShard.
//
// Each worker opens one bidirectional Train stream. The server reads the worker's
// messages on the stream's handler thread and hands them to the shard; what the shard
// answers goes into that worker's send queue, and one writer thread per stream keeps
// at most one Write in flight, highest priority first (or FIFO, per the handshake). The
// streams that cross the network are lanes of one link queue (p3/core/send_queue.h): one
// priority order and one credit over all of them, because they share the machine's link.
// A colocated worker's values go through its shared memory instead (ServerOptions::
// shared_memory).
//
// Failure handling: a refused handshake ends only that stream, with a status saying
// why. Once a worker has joined, synchronous training needs it: if its stream breaks or
// it sends a malformed message, every stream is ended with an error naming that worker,
// and Wait() returns that error, which also names the workers of the starting membership
// that have not joined (a worker that never came fails the others' waits for parameters
// within their peer_timeout; their streams end, and so does the server's run). A dead
// worker's connection is detected by TCP or by keepalive pings within `peer_timeout`.
// With `rejoin_timeout` > 0, a worker whose stream breaks after the initial values are in
// may instead be replaced: the server waits that long for a Hello with `rejoin` of the
// same rank (docs/protocol.md, "Rejoining worker") while the other workers simply wait
// for their parameters; past it, it fails as above.
//
// Example:
//   ServerOptions options;
//   options.shard.num_workers = 2;
//   auto server = ParameterServer::Start(options);     // binds 127.0.0.1, any port
//   if (!server.ok()) return server.status();
//   std::cout << (*server)->port();
//   absl::Status result = (*server)->Wait();           // until every worker is done
//
// Thread-safe.
#ifndef P3_SERVER_PARAMETER_SERVER_H_
#define P3_SERVER_PARAMETER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "p3/core/parameter_shard.h"
#include "p3/base/trace.h"

namespace p3 {

struct ServerOptions {
  // host:port to bind; port 0 picks a free port. Default: "127.0.0.1:0".
  std::string address = "127.0.0.1:0";
  // Shard settings: server index, number of workers, optimizer, checkpoints. The server
  // runs `shard.on_checkpoint` on a checkpoint writer thread of its own, so that a disk
  // write does not stall the stream that completed the iteration; Shutdown() waits for the
  // queued checkpoints.
  ShardOptions shard;
  // A silent worker connection is declared dead after this long. Default: 60 s.
  absl::Duration peer_timeout = absl::Seconds(60);
  // Gradients of a slice awaited this long are logged on stderr with the workers they
  // wait for, and again every stall_report while the wait lasts; the workers that are
  // waiting too are told (a Stall message) and log it. Zero: no reports. Default: 10 s.
  absl::Duration stall_report = absl::Seconds(10);
  // The most values one message down carries; a larger slice is written as consecutive
  // parts. Default: kDefaultMaxMessageParams (1,048,576).
  int64_t max_message_params = kDefaultMaxMessageParams;
  // Bytes of messages that may be handed to the streams that cross the network and not
  // yet written to their sockets, over all of them (p3/core/send_queue.h); one message is
  // always allowed, however large. 0: one message at a time on the link. Default: 0.
  int64_t credit_bytes = 0;
  // A message a stream has not written within this time (its peer stopped reading) no
  // longer holds the link's credit: the other streams go on (SendQueueOptions::
  // stalled_after; scheduling.stalled_write_s). absl::InfiniteDuration(): never.
  // Default: 1 s.
  absl::Duration stalled_write = absl::Seconds(1);
  // Map the shared memory a worker on the same machine offers in its Hello
  // (p3/core/shared_memory.h), and exchange that worker's values through it. A region that
  // cannot be mapped (another machine, a stale offer) is declined with a warning on stderr
  // and the values go over the stream. Default: true.
  bool shared_memory = true;
  // TLS: PEM certificate chain and private key of this server. Both empty: plaintext.
  // Default: "".
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // Shared token a worker's Hello must carry; empty: no check. Default: "".
  std::string token;
  // > 0: a worker whose stream breaks (its process died) may rejoin within this long
  // (ShardOptions::accept_rejoin is set from it). 0: a broken stream fails the run at
  // once. Default: 0.
  absl::Duration rejoin_timeout = absl::ZeroDuration();
  // Records, per worker stream, each message handled (aggregation and update) and each
  // write; not owned, may be null. Default: none.
  TraceRecorder* trace = nullptr;
};

class ParameterServer {
 public:
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Start(const ServerOptions& options);
  ~ParameterServer();

  // The bound port.
  int port() const;

  // Blocks until every worker has finished (OK), or the run failed (the error). Also
  // where a worker that did not rejoin within rejoin_timeout fails the run.
  absl::Status Wait();

  // The shard, for inspection in tests.
  const ParameterShard& shard() const;

  // Send lanes allocated for streams over the network (p3/core/send_queue.h lane_slots()):
  // at most the streams live at once, however often workers rejoin. For tests.
  size_t network_lane_slots() const;

  // Ends every stream and stops serving. Safe to call twice.
  void Shutdown();

  class Impl;

 private:
  explicit ParameterServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace p3

#endif  // P3_SERVER_PARAMETER_SERVER_H_
