// Workers and parameter servers in one process, without gRPC: an InMemoryServer holds a
// ParameterShard (p3/core/parameter_shard.h) as ParameterServer does behind its streams,
// and an in-memory transport (worker/transport.h) is one worker's link to it. The link has
// threads of its own, as a stream does: a writer that takes the worker's messages from its
// lane of the send queue and hands them to the shard (in parts of max_message_params,
// 16-bit gradients encoded as the wire would carry them), and a reader that takes the
// server's answers from the server's send queue (ordered by priority over all workers) and
// hands them to the worker's core. So ordering and concurrency are those of a cluster:
// for trying a model or a trainer on one machine, and for tests of the worker.
//
// Not supported: shared memory (the values are in memory anyway; an offer is declined),
// rejoining, TLS and the token (there is no network), checkpoint files
// (ShardOptions::on_checkpoint still runs), stall reports, trace events.
//
// Example:
//   std::vector<std::unique_ptr<p3::InMemoryServer>> servers;
//   for (int s = 0; s < 2; ++s) {
//     servers.push_back(std::make_unique<p3::InMemoryServer>(
//         p3::ShardOptions{.server_index = s, .num_workers = 4}));
//   }
//   p3::WorkerOptions options;
//   options.servers = {"memory:0", "memory:1"};    // names, for messages only
//   options.transport_factory = p3::InMemoryTransportFactory({servers[0].get(),
//                                                             servers[1].get()});
//   P3_ASSIGN_OR_RETURN(auto worker, p3::Worker::Create(options, model));  // per rank
//   ...
//   for (auto& server : servers) P3_RETURN_IF_ERROR(server->Wait());
//
// Thread-safe. A server must outlive the transports linked to it.
#ifndef P3_WORKER_IN_MEMORY_TRANSPORT_H_
#define P3_WORKER_IN_MEMORY_TRANSPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "p3/core/downstream.h"
#include "p3/core/parameter_shard.h"
#include "p3/core/send_queue.h"
#include "p3/core/to_server.h"
#include "worker/transport.h"

namespace p3 {

class InMemoryServer {
 public:
  explicit InMemoryServer(const ShardOptions& options);

  InMemoryServer(const InMemoryServer&) = delete;
  InMemoryServer& operator=(const InMemoryServer&) = delete;

  // Blocks until every worker has finished here (OK) or the run has failed here (why).
  absl::Status Wait();

  // The server dies (fault injection): every link to it breaks with `status` (not OK),
  // and the workers that link later are refused with it. The first failure wins.
  void Fail(const absl::Status& status);

  const ParameterShard& shard() const { return shard_; }

 private:
  friend class InMemoryTransport;

  // What the server's send queue delivers to a worker's link: a message, or the link's
  // end.
  struct Delivery {
    // As a server's stream sends them: the shard's answers (kParams, kAck, kBuffers), rank
    // 0's re-plan forwarded (kReplan), and kAbort when the run failed (naming the worker
    // that broke it). Not used once `end` is set.
    Downstream message;
    // Instead of a message: the link ends with this status (OK: after the worker's Done).
    std::optional<absl::Status> end;
  };
  struct LinkState {
    int lane = 0;
    bool ended = false;  // its end or an Abort is queued, or the link is gone
  };

  // The transport's side, on its threads. The handshake of worker options.rank: returns
  // the version the shard starts from.
  absl::StatusOr<uint64_t> Link(const TransportOptions& options);
  // Worker `rank`'s message, handled as a server handles one from its stream: the values
  // of Init and Gradient in parts of at most `max_message_params`.
  void Receive(int rank, const Upstream& message, int64_t max_message_params);
  // The server's next message to worker `rank`, once it is that link's turn; none once
  // the link is closed. Release() it once delivered.
  std::optional<SendQueue<Delivery>::Item> Next(int rank);
  void Release(int rank, int64_t bytes);
  // Worker `rank`'s link is gone: before its Done, the run fails here as when a stream
  // breaks. Nothing more goes to it. Safe to call twice.
  void Unlink(int rank);
  // After Unlink, once nobody takes from the link any more: frees its lane.
  void ReleaseLink(int rank);

  // The shard's part of Receive; what it answers is appended to `out`.
  absl::Status Handle(int rank, const Upstream& message, int64_t max_message_params,
                      std::vector<ToWorker>* out);
  // The run fails because of worker `rank` (-1: the server itself): that link ends with
  // `status`, the others get an Abort saying which worker broke the run.
  void FailLocked(int rank, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Push(LinkState& link, Delivery delivery, int64_t priority, int64_t tiebreak, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ParameterShard shard_;
  absl::Mutex mu_;
  // The send order of the server's answers over every link: made at the first link, in
  // the order its signature says, never replaced.
  std::unique_ptr<SendQueue<Delivery>> send_queue_ ABSL_GUARDED_BY(mu_);
  std::map<int, LinkState> links_ ABSL_GUARDED_BY(mu_);  // by rank
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool all_done_ ABSL_GUARDED_BY(mu_) = false;
};

// A transport to `server` (not owned): the handshake, then the writer and reader threads.
// Refused: a rejoin, TLS, and whatever the server refuses (another signature, ...).
absl::StatusOr<std::unique_ptr<Transport>> OpenInMemoryTransport(const TransportOptions& options,
                                                                 InMemoryServer* server);

// A factory for WorkerOptions::transport_factory: server i is servers[i] (not owned).
TransportFactory InMemoryTransportFactory(std::vector<InMemoryServer*> servers);

}  // namespace p3

#endif  // P3_WORKER_IN_MEMORY_TRANSPORT_H_
