// The seam between the worker and the way it talks to one server: the worker's protocol
// state is a WorkerCore (p3/core/worker_core.h), which says what to send; a Transport carries
// those messages to one server and hands what comes back to a TransportListener. The
// gRPC stream (worker/server_connection.h) is the implementation; with a server on the
// same machine it moves the values through shared memory (p3/core/shared_memory.h) and only
// descriptors over the stream.
//
// A Transport keeps at most one write in flight and orders the rest in a lane of the send queue
// (p3/core/send_queue.h); the values of Init and Gradient messages are read from the
// WorkerCore (WorkerCore::Values) right before they are written, off the training thread.
//
// Example:
//   std::vector<std::unique_ptr<Transport>> links = ...;  // one per server, opened
//   std::vector<uint64_t> starts;
//   for (auto& link : links) starts.push_back(link->start_version());
//   P3_ASSIGN_OR_RETURN(std::vector<ToServer> out, core.Start(starts));
//   for (const ToServer& m : out) links[m.server]->Send(m);
//   ...
//   for (auto& link : links) P3_RETURN_IF_ERROR(link->Close(deadline));
//
// Implementations are thread-safe; the listener is called from the transport's own
// threads, one thread per Transport at a time.
#ifndef P3_WORKER_TRANSPORT_H_
#define P3_WORKER_TRANSPORT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "p3/core/worker_core.h"

namespace p3 {

// The values of one received part: bytes to copy, or values the server has written
// into the parameters itself (shared memory with a colocated server).
struct ReceivedValues {
  // Raw bytes in the wire's dtype (float32, bfloat16 or float16), in order, possibly split
  // at any byte (a message's buffers), valid during the call only; `bytes` in all.
  std::vector<absl::string_view> segments;
  size_t bytes = 0;
  // The message's scale_exponent (float16 streams), when it has one.
  std::optional<int> scale_exponent;
  // Non-zero: no bytes; this many values are in place in the parameters already.
  int64_t in_place_count = 0;
};

// What a transport delivers from server `server`, in core types.
class TransportListener {
 public:
  virtual ~TransportListener() = default;
  // A part of version `version` of `slice_id`: the slice's values from `offset` on.
  virtual void OnParams(int server, int64_t slice_id, uint64_t version, uint64_t offset,
                        const ReceivedValues& values) = 0;
  virtual void OnAck(int server, int64_t slice_id, uint64_t iteration) = 0;
  // Round `round` of the mean of all workers' buffers (Upstream::Kind::kBuffers): raw
  // float32 bytes, valid during the call only.
  virtual void OnBuffers(int server, uint64_t round, absl::string_view values) = 0;
  // Rank 0's re-plan, forwarded by `server` (docs/protocol.md, "Re-plan"): slices are
  // `slice_params` long from iteration `from_iteration` on. Default: the run fails (a
  // listener that cannot re-plan must not go on in the old plan).
  virtual void OnReplan(int server, uint64_t from_iteration, int64_t slice_params) {
    OnFailure(server, absl::UnimplementedError(absl::StrCat(
                          "server ", server, " forwarded a re-plan from iteration ",
                          from_iteration, ", which this transport's listener cannot follow")));
  }
  // The peer is dead, aborted the run, or ended the stream before a clean close: the run
  // cannot go on. Called at most once (this or OnAbort).
  virtual void OnFailure(int server, const absl::Status& status) = 0;
  // Instead of OnFailure when the server ended the stream with an Abort: the run failed
  // elsewhere, and the Abort names what that server saw (often not the first failure:
  // a worker it lost, which lost another server). Called on the stream's reader thread
  // after the stream has ended, so it may wait. Default: OnFailure.
  virtual void OnAbort(int server, const absl::Status& status) { OnFailure(server, status); }
};

// A worker's open link to one server, after the handshake.
class Transport {
 public:
  virtual ~Transport() = default;

  // Queues `message` (message.server is this link's server): smaller priority first, ties
  // by tiebreak (FIFO when the link was opened without priority).
  virtual void Send(const ToServer& message) = 0;

  // Queues Done after everything else and waits until the server has closed the link.
  virtual absl::Status Close(absl::Time deadline) = 0;

  // Ends the link at once; its threads are joined. Safe to call twice.
  virtual void Shutdown() = 0;

  // The version the server starts from (its Welcome): 0, or a checkpoint's iteration.
  virtual uint64_t start_version() const = 0;

  // For a rejoined worker (ConnectionOptions::rejoin): the oldest version of the server's
  // slices when it welcomed the worker back (UINT64_MAX: it owns none); 0 otherwise.
  virtual uint64_t current_version() const { return 0; }

  // The server took a Hello with rejoin as a rejoin (Welcome.rejoined). false for a new
  // server process, which a restarted worker then joins as at a first start.
  virtual bool rejoined() const { return false; }

  // Bytes of values sent and received through the link's stream (not shared memory).
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;
  // Bytes of values exchanged through shared memory, both directions.
  virtual int64_t bytes_shared() const { return 0; }
};

}  // namespace p3

#endif  // P3_WORKER_TRANSPORT_H_
