// The inside of a ParameterServer (server/parameter_server.h), private to server/: one
// class, its definitions in a file per concept of the edge:
//   parameter_server.cc   the lifecycle: Start (the gRPC server), Wait, Shutdown, Fail
//   stream_handler.cc     a worker's stream on gRPC's handler thread: the handshake, then
//                         every message read and handed to the shard (message_handler.h)
//   stream_writer.cc      what goes down: the shard's answers and the control messages
//                         queued in the stream's lane of the send queue, one writer thread
//                         per stream; the stall reports and forwarded re-plans
//   colocated_worker.cc   a worker on the same machine: its shared memory mapped, and
//                         each version written into its parameters
//
// A message's way through it: Serve() reads it, HandleWorkerMessage() hands it to the
// shard, Dispatch() queues the shard's answers (ToWorker) in their workers' lanes, and
// each stream's WriteLoop() pops the most urgent one and writes it.
//
// Thread-safe: gRPC runs one Serve() per stream on its own thread; each stream has a
// writer thread; the stall watcher and Wait() run on theirs. What they share is guarded
// by mu_ (the streams, the link, the run's outcome) or is the shard, which is
// thread-safe itself.
#ifndef P3_SERVER_PARAMETER_SERVER_IMPL_H_
#define P3_SERVER_PARAMETER_SERVER_IMPL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "p3/core/checkpoint.h"
#include "p3/core/downstream.h"
#include "p3/core/parameter_shard.h"
#include "p3/core/send_queue.h"
#include "p3/core/shared_memory.h"
#include "p3/core/stall_report.h"
#include "proto/p3.pb.h"
#include "proto/raw_train.h"
#include "proto/wire_codec.h"
#include "server/message_handler.h"
#include "server/parameter_server.h"

namespace p3 {

class ParameterServer::Impl {
 public:
  explicit Impl(const ServerOptions& options);

  absl::Status Start();
  absl::Status Wait();
  void Shutdown();

  int port() const { return port_; }
  const ParameterShard& shard() const { return shard_; }
  size_t network_lane_slots();

 private:
  // Raw streams (proto/raw_train.h): messages are encoded and decoded by
  // proto/wire_codec.h, so that slice values never pass through a protobuf string.
  using TrainStream = RawTrainServerStream;

  // One worker's stream, from its Hello to its end.
  struct Connection {
    int rank = 0;
    grpc::ServerContext* context = nullptr;
    // The send queue: a lane of the server's link_, or own_queue for a worker whose
    // values go through shared memory (they do not use the network link).
    SendQueue<Downstream>* queue = nullptr;
    int lane = 0;
    std::unique_ptr<SendQueue<Downstream>> own_queue;
    int receive_track = 0;
    int send_track = 0;
    // The worker's shared memory (slices located by the shard's plan); set before the
    // stream's threads start, null when the values go over the stream.
    std::unique_ptr<SharedRegion> shared;
    SharedValues shared_values;
    // The Hello was a rejoin (Welcome.rejoined), and this shard's oldest version then.
    bool rejoined = false;
    uint64_t current_version = 0;
    // The shard's plan when the worker joined (Welcome.plan_slice_params/from_iteration).
    PlanInForce plan;
    // Versions go down several slices to a message (shared memory, and the worker's Hello
    // says takes_shared_batches); `batch` is the writer's, reused.
    bool batches_down = false;
    std::vector<SendQueue<Downstream>::Item> batch;

    bool Push(Downstream message, int64_t priority, int64_t tiebreak, int64_t bytes) {
      return queue->Push(lane, std::move(message), priority, tiebreak, bytes);
    }
  };

  // --- stream_handler.cc

  // gRPC's handler of one Train stream: the Hello (token, signature, join or rejoin),
  // the Connection and its writer thread, then ReadLoop until the stream ends.
  absl::Status Serve(grpc::ServerContext* context, TrainStream* stream);
  // A rejoining worker's old stream may not have noticed yet that its process is gone:
  // it is cancelled, and the rejoin waits (at most peer_timeout) until its handler has
  // returned, so that none of the old process's messages is handled after the rejoin.
  absl::Status EndOldStreamLocked(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads until the worker's Done (OK) or an error.
  // A stream that breaks sets `awaiting_rejoin` when the worker may rejoin (rejoins on,
  // initial values in): the run goes on without it for up to rejoin_timeout (Wait()).
  absl::Status ReadLoop(int rank, const Connection& conn, TrainStream* stream,
                        bool* awaiting_rejoin);
  // Compares in time independent of where the tokens differ.
  bool TokenMatches(const std::string& given) const;
  // ", after this server had waited 6.2s for the gradients of iteration 3 from worker 1
  // (the stall came first)" when `rank` left while a stall report about other workers was
  // still current (its iteration among `waits`, shard_.Waits() read before mu_); else "".
  std::string StalledBefore(int rank, const std::vector<SliceWait>& waits) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool tracing() const { return options_.trace != nullptr && options_.trace->enabled(); }
  // One event per message handled; "update" when it completed a slice's aggregation.
  void Trace(int track, const DecodedWorkerMessage& msg, const std::vector<ToWorker>& out,
             absl::Time start);
  // A SharedSlices message of gradients: checked as a whole, then each slice handled and
  // its answers dispatched before the next (the first versions go down while the others
  // are summed). An error ends the stream as a refused message does.
  absl::Status ServeSharedGradients(int rank, const Connection& conn,
                                    const wire::SharedSlices& batch, Handled* handled);

  // --- stream_writer.cc

  // Routes the shard's answers to the workers' queues.
  void Dispatch(const std::vector<ToWorker>& out);
  // The stream's writer thread: pops its lane, most urgent first, until the lane closes
  // or a write fails; at most one write in flight.
  void WriteLoop(Connection* conn, TrainStream* stream);
  // Writes version `d.version` of a slice to the worker: into its shared memory with a
  // descriptor on the stream (WriteSharedParams), or on the stream in parts of at most
  // max_message_params, back to back. The stream's buffers point into the shard's
  // snapshot, which they keep alive until gRPC has sent them (the shard then takes fresh
  // storage for the next version instead of overwriting this one). On a 16-bit wire
  // the snapshot is the version encoded once for every worker, and its bytes go out as
  // they are.
  bool WriteParams(const Connection& conn, const Downstream& d, TrainStream* stream);
  // The header of a version's message(s): slice id, version, the snapshot's scale.
  static SliceHeader ParamsHeader(const Downstream& d);
  // One event per message of the shard written (kParams, kAck, kBuffers), with what it
  // counts under its own name.
  void TraceSend(int track, const Downstream& d, int64_t bytes, absl::Time start);
  // Every stall_report / 4: logs the gradients awaited for stall_report or longer, and
  // tells the workers that are waiting for them whom they wait for; at each report,
  // resets the congestion control of this server's TCP connections left stuck by a link
  // fault (data queued, paced below 100 kbit/s: p3/base/tcp_nudge.h).
  void WatchStalls();
  // Rank 0's re-plan, which the shard accepted, to every worker ahead of anything queued:
  // in particular ahead of this server's values of version `from_iteration`, which cannot
  // exist yet (they need rank 0's gradients that follow the Replan on its stream).
  void ForwardReplan(uint64_t from_iteration, int64_t slice_params);
  // A membership change rank 0 made (elastic runs), to every worker, urgent.
  void ForwardMembership(const MembershipChange& change);
  // The same message, for one stream.
  static Downstream MembershipMessage(const MembershipChange& change);

  // --- colocated_worker.cc

  // Maps the shared memory worker `hello.rank()` offers, or declines it with a warning.
  void MapSharedMemory(const wire::Hello& hello, Connection* conn);
  // WriteParams for a colocated worker: the version decoded into its parameters (the
  // same float32 values it would decode from the stream), `header` and a shared_count
  // on the stream.
  bool WriteSharedParams(const Connection& conn, const Downstream& d, SliceHeader header,
                         TrainStream* stream);
  // For a worker that takes them (batches_down): the version `first` (popped) and the
  // versions after it that the lane hands out at once (SendQueue::PopAlso), at most
  // kSharedBatchSend in all, each decoded into the worker's parameters, then one
  // SharedSlices message (a single one as WriteSharedParams writes it). Releases them
  // together and traces each.
  bool WriteSharedParamsBatch(Connection* conn, SendQueue<Downstream>::Item first,
                              TrainStream* stream, absl::Time start);

  // --- parameter_server.cc

  // Worker `rank` broke the run: every other stream is told why and ended.
  void Fail(int rank, const absl::Status& status);
  void FailLocked(int rank, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "; worker 1 has not joined this server" (or "workers 1, 3 have ...") when ranks of the
  // starting membership have not joined: a run that fails
  // before they come (its joined workers timed out waiting for their gradients) says who
  // was missing. "" when there are none, or when `rank` itself has not joined (refused).
  std::string NotJoinedLocked(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServerOptions options_;
  RawTrainService service_;
  // Runs options_.shard.on_checkpoint; null without one. Declared before shard_, which
  // hands it the checkpoints.
  std::unique_ptr<CheckpointWriter> checkpoint_writer_;
  ParameterShard shard_;
  std::unique_ptr<grpc::Server> server_;
  // The stall reports' thread (stall_report > 0), stopped by Shutdown().
  absl::Notification stop_watching_;
  std::thread stall_watcher_;
  int port_ = 0;

  absl::Mutex mu_;
  std::map<int, Connection*> streams_ ABSL_GUARDED_BY(mu_);
  // The send order of the streams that cross the network; made at the first join.
  std::unique_ptr<SendQueue<Downstream>> link_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  // The watcher's latest stall report and when it was made: a worker that disconnects
  // during another's stall is named with it, so that the error says what came first.
  std::shared_ptr<const StallReport> last_stall_ ABSL_GUARDED_BY(mu_);
  absl::Time last_stall_at_ ABSL_GUARDED_BY(mu_);
  bool all_done_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Workers gone and awaited (rejoin_timeout > 0): rank -> when waiting ends. Every
  // change bumps absent_generation_, which Wait() watches.
  std::map<int, absl::Time> absent_ ABSL_GUARDED_BY(mu_);
  int64_t absent_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t wait_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace p3

#endif  // P3_SERVER_PARAMETER_SERVER_IMPL_H_
