// The seam between the worker and the way it talks to one server: a factory in, events
// out. The worker's protocol state is a WorkerCore (p3/core/worker_core.h), which says what
// to send; a Transport carries those messages to one server, and hands what comes back
// straight to the core (p3/core/transport_core.h: a part of a slice's values; an Ack,
// whose Pull it sends back itself). Only what the core cannot handle goes to the worker, a
// TransportListener: failures and aborts, the buffers' mean, re-plans.
//
// The worker opens one Transport per server through a TransportFactory
// (WorkerOptions::transport_factory). The gRPC stream (worker/server_connection.h) is the
// default; worker/in_memory_transport.h connects workers to ParameterShards in the same
// process. A new transport goes beside them, without touching the worker.
//
// A Transport keeps at most one write in flight and orders the rest in its lane of the
// send queue (p3/core/send_queue.h). A message carries what its writer needs: the values
// of Init and Gradient messages are read from where the message points, in the encoding it
// names (p3/core/to_server.h), right before they are written, off the training thread.
//
// Example (a transport for some other network, given to the worker):
//   p3::WorkerOptions options = ...;
//   options.transport_factory = [](const p3::TransportOptions& link)
//       -> absl::StatusOr<std::unique_ptr<p3::Transport>> {
//     return MyTransport::Open(link);   // link.address, link.signature, link.core, ...
//   };
//   P3_ASSIGN_OR_RETURN(auto worker, p3::Worker::Create(options, model));
//
// Implementations are thread-safe. The core and the listener are called from the
// transport's own threads, one thread per Transport at a time.
#ifndef P3_WORKER_TRANSPORT_H_
#define P3_WORKER_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "p3/base/trace.h"
#include "p3/core/cluster_signature.h"
#include "p3/core/send_queue.h"
#include "p3/core/slice_plan.h"
#include "p3/core/to_server.h"
#include "p3/core/transport_core.h"

namespace p3 {

// What a transport delivers from server `server` that is not the core's: every call
// comes from the transport's own threads.
class TransportListener {
 public:
  virtual ~TransportListener() = default;
  // Round `round` of the mean of all workers' buffers (Upstream::Kind::kBuffers): raw
  // float32 bytes, valid during the call only.
  virtual void OnBuffers(int server, uint64_t round, absl::string_view values) = 0;
  // Rank 0's re-plan, forwarded by `server` (docs/protocol.md, "Re-plan"): slices are
  // `slice_params` long from iteration `from_iteration` on. Default: the run fails (a
  // listener that cannot re-plan must not go on in the old plan).
  virtual void OnReplan(int server, uint64_t from_iteration, int64_t slice_params) {
    OnFailure(server, absl::UnimplementedError(absl::StrCat(
                          "server ", server, " forwarded a re-plan from iteration ", from_iteration,
                          ", which this transport's listener cannot follow")));
  }
  // Rank 0's membership change (elastic runs), forwarded by `server`: the workers of
  // `present` take part from iteration `from_iteration` on. Default: the run fails.
  virtual void OnMembership(int server, uint64_t from_iteration, const std::vector<int>& present) {
    OnFailure(server, absl::UnimplementedError(absl::StrCat(
                          "server ", server, " forwarded a membership change from iteration ",
                          from_iteration, ", which this transport's listener cannot follow")));
  }
  // Server `server` has waited for the gradients of `iteration` from `missing_ranks`
  // (its Stall message). Default: nothing.
  virtual void OnStall(int server, uint64_t iteration, const std::vector<int>& missing_ranks) {}
  // The peer is dead, aborted the run, ended the stream before a clean close, or sent
  // what the core refused: the run cannot go on. Called at most once (this or OnAbort).
  virtual void OnFailure(int server, const absl::Status& status) = 0;
  // Instead of OnFailure when the server ended the stream with an Abort: the run failed
  // elsewhere, and the Abort names what that server saw (often not the first failure:
  // a worker it lost, which lost another server). Called on the transport's reader
  // thread after the link has ended, so it may wait. Default: OnFailure.
  virtual void OnAbort(int server, const absl::Status& status) { OnFailure(server, status); }
};

// Everything one link needs: which server, who this worker is, where its messages are
// ordered, where what comes back goes.
struct TransportOptions {
  // Index of the server (0 .. S-1) and its address (WorkerOptions::servers; for the gRPC
  // transport host:port). Default: 0, "".
  int server_index = 0;
  std::string address;
  // This worker's rank and the cluster's shared token, sent in the handshake. Default: 0, "".
  int rank = 0;
  std::string token;
  // The cluster's signature, sent in the handshake (the server refuses a mismatch). Its
  // `priority` says whether the link's own send queue, when it has one, orders by priority
  // (else FIFO). Default: empty.
  ClusterSignature signature;
  // The send queue shared with this worker's other links over the same network link
  // (p3/core/send_queue.h): one priority order and one credit across them; the transport
  // takes a lane of it. Not owned; must outlive the transport. A transport that does not
  // use the network link (values through shared memory) orders its messages in a queue of
  // its own. Null: a queue of its own. Default: null.
  SendQueue<Upstream>* send_queue = nullptr;
  // Credit of the queue of its own (when `send_queue` is null or unused), in bytes.
  // Default: 0.
  int64_t credit_bytes = 0;
  // A message a stream has not written within this time (its peer stopped reading) no
  // longer holds the link's credit: the other streams go on (SendQueueOptions::
  // stalled_after; scheduling.stalled_write_s). absl::InfiniteDuration(): never.
  // Default: 1 s.
  absl::Duration stalled_write = absl::Seconds(1);
  // How long to wait for the server to accept the link; also the keepalive bound.
  // Default: 60 s.
  absl::Duration peer_timeout = absl::Seconds(60);
  // The most values one message carries; a larger init or gradient is written as
  // consecutive parts, back to back. Default: kDefaultMaxMessageParams (1,048,576).
  int64_t max_message_params = kDefaultMaxMessageParams;
  // TLS, for transports over a network: PEM root certificate(s) to verify the server with
  // (empty: the system's roots) and a name to check its certificate against instead of
  // the address's. Default: plaintext.
  bool tls = false;
  std::string tls_ca_pem;
  std::string tls_server_name;
  // Shared memory holding this worker's parameters and gradients (p3/core/shared_memory.h),
  // offered to the server in the handshake: a server on the same machine maps it, and from
  // then on the values travel through it. Empty name: no offer. Default: none.
  std::string shared_memory_name;
  uint64_t shared_memory_nonce = 0;
  // This process replaces a dead worker of the same rank: the handshake says `rejoin`
  // (docs/protocol.md, "Rejoining worker"). Default: false.
  bool rejoin = false;
  // Timeline of writes and receives; not owned, may be null. Default: none.
  TraceRecorder* trace = nullptr;
  // Fault injection for tests: called on the writer thread with each message just before
  // it is written. It may block: the link then has no write in flight, and later
  // messages wait in the send queue, which orders them. With it set, a shared-memory
  // link writes one slice per message (no SharedSlices). Default: none.
  std::function<void(const Upstream&)> before_write;
  // The link's writer and reader threads put themselves in SCHED_BATCH: they do not
  // preempt a computing thread when they wake (p3/base/thread_policy.h;
  // WorkerOptions::batch_io_threads). Default: false.
  bool batch_io_threads = false;
  // Where received values and acks go (the worker's WorkerCore), and where everything else
  // goes. Not owned; both must outlive the transport. Required.
  TransportCore* core = nullptr;
  TransportListener* listener = nullptr;
};

// A worker's open link to one server, after the handshake.
class Transport {
 public:
  virtual ~Transport() = default;

  // Queues `message` (message.server is this link's server): smaller priority first, ties
  // by tiebreak (FIFO when the link orders without priority).
  virtual void Send(const ToServer& message) = 0;

  // Queues Done after everything else and waits until the server has closed the link.
  virtual absl::Status Close(absl::Time deadline) = 0;

  // Ends the link at once; its threads are joined. Safe to call twice.
  virtual void Shutdown() = 0;

  // The version the server starts from (its Welcome): 0, or a checkpoint's iteration.
  virtual uint64_t start_version() const = 0;

  // For a rejoined worker (TransportOptions::rejoin): the oldest version of the server's
  // slices when it welcomed the worker back (UINT64_MAX: it owns none); 0 otherwise.
  virtual uint64_t current_version() const { return 0; }

  // The plan the server's slices are cut in when the worker joined (its Welcome): not the
  // signature's after a re-plan or a restored checkpoint taken under one. The worker
  // takes it before it starts or resumes (WorkerCore::TakePlan).
  virtual PlanInForce plan_in_force() const { return {}; }

  // The server took a handshake with rejoin as a rejoin. false for a new server process,
  // which a restarted worker then joins as at a first start.
  virtual bool rejoined() const { return false; }

  // The server accepted the shared memory offered (TransportOptions::shared_memory_name):
  // values travel through it.
  virtual bool shared_memory() const { return false; }

  // The server owns no slice and writes checkpoints (its Welcome): worker 0 tells it each
  // version it holds every value of (Upstream::Kind::kReached), which it checkpoints by.
  virtual bool wants_reached() const { return false; }

  // Bytes of values sent and received through the link's stream (not shared memory).
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;
  // Bytes of values exchanged through shared memory, both directions.
  virtual int64_t bytes_shared() const { return 0; }
};

// Opens the link `options` describes: connects and completes the handshake, or returns
// why not (the server's refusal, a timeout, ...). The worker calls it once per server, for
// all its servers at once, each call on a thread of its own (worker/worker_options.h,
// OpenTransports): a factory must allow concurrent calls.
using TransportFactory =
    std::function<absl::StatusOr<std::unique_ptr<Transport>>(const TransportOptions& options)>;

}  // namespace p3

#endif  // P3_WORKER_TRANSPORT_H_
