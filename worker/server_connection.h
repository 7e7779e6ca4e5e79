// A worker's connection to one parameter server over gRPC, the default Transport
// (worker/transport.h) of a cluster: one bidirectional Train stream, a lane of the send
// queue in front of it, a writer thread that keeps exactly one Write in flight, and a
// reader thread that hands the server's values and acks to the worker's core (answering an
// Ack with its Pull on the same stream) and everything else to the listener. The one
// place where the worker converts between the wire (proto/wire_codec.h: slice values go
// from the worker's buffers into gRPC's slices and back without a protobuf string) and
// the core's types.
//
// Messages are queued as small descriptors and encoded by the writer thread right before
// they are written: a hand-encoded header plus gRPC slices pointing at the values the
// message names (p3/core/to_server.h), or, on a 16-bit wire, encoded straight into the
// memory gRPC sends, so values are never copied on the training thread, nor into a
// protobuf string.
//
// Example:
//   p3::TransportOptions link;
//   link.address = "10.0.0.1:7070";
//   link.signature = signature;
//   link.core = &core;            // a WorkerCore
//   link.listener = &listener;
//   P3_ASSIGN_OR_RETURN(std::unique_ptr<p3::ServerConnection> conn,
//                       p3::ServerConnection::Open(link));
//   conn->Send(*core.Gradient(slice_id, iteration));
//
// Thread-safe. The core and the listener are called from the reader thread.
#ifndef P3_WORKER_SERVER_CONNECTION_H_
#define P3_WORKER_SERVER_CONNECTION_H_

#include <grpcpp/channel.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "p3/core/send_queue.h"
#include "p3/core/to_server.h"
#include "proto/p3.pb.h"
#include "proto/raw_train.h"
#include "proto/wire_codec.h"
#include "worker/link_end.h"
#include "worker/transport.h"

namespace p3 {

class ServerConnection : public Transport {
 public:
  // Connects to options.address, sends the Hello (signature, rank, token, shared memory,
  // rejoin) and waits for the Welcome, at most peer_timeout. A refused handshake returns
  // the server's status (e.g. FailedPrecondition: "worker 1 refused: tensor 3 ...").
  // options.core and options.listener must outlive the connection.
  static absl::StatusOr<std::unique_ptr<ServerConnection>> Open(const TransportOptions& options);
  ~ServerConnection() override;

  // Transport.
  void Send(const ToServer& message) override;
  absl::Status Close(absl::Time deadline) override;
  void Shutdown() override;
  uint64_t start_version() const override { return welcome_.start_version(); }
  uint64_t current_version() const override { return welcome_.current_version(); }
  bool rejoined() const override { return welcome_.rejoined(); }
  PlanInForce plan_in_force() const override {
    return PlanInForce{.from_iteration = welcome_.plan_from_iteration(),
                       .slice_params = welcome_.plan_slice_params()};
  }
  bool shared_memory() const override { return welcome_.shared_memory(); }
  bool wants_reached() const override { return welcome_.wants_reached(); }
  int64_t bytes_sent() const override { return bytes_sent_.load(); }
  int64_t bytes_received() const override { return bytes_received_.load(); }
  int64_t bytes_shared() const override { return bytes_shared_.load(); }

  // The server's Welcome.
  const wire::Welcome& welcome() const { return welcome_; }

 private:
  explicit ServerConnection(const TransportOptions& options);
  // Writes the values of an Init or Gradient: a descriptor when they are in shared
  // memory, else the values themselves, zero-copy, in parts of at most max_message_params.
  bool WriteValues(const Upstream& up);
  // A colocated link's gradient `first` (popped) and the gradients after it that the
  // send queue hands out at once (SendQueue::PopAlso), at most kSharedBatchSend in all,
  // as one SharedSlices message (a single one as a plain descriptor). Traces each and
  // releases them together.
  bool WriteSharedGradients(SendQueue<Upstream>::Item first, absl::Time start);
  // On the writer and reader threads: SCHED_BATCH when options_.batch_io_threads.
  void YieldToComputation();
  void WriteLoop();
  void ReadLoop();
  // Hands a received slice message's values to the core.
  absl::Status ReceiveParams(const DecodedServerMessage& msg, ReceivedValues* received);
  // Hands a SharedSlices message's versions to the core, in its order.
  absl::Status ReceiveSharedParams(const wire::SharedSlices& batch, ReceivedValues* received);
  // Counts a shared-memory descriptor of `count` values down, and hands it to the core.
  absl::Status ReceiveInPlace(const SliceHeader& h, ReceivedValues* received);
  // The trace event of a message written, begun at `start`.
  void TraceWrite(const Upstream& up, int64_t bytes, absl::Time start);

  const TransportOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext context_;
  std::unique_ptr<RawTrainClientStream> stream_;
  // The send queue: options_.send_queue, or own_send_queue_ when the values go through
  // shared memory; lane_ is this connection's place in it.
  std::unique_ptr<SendQueue<Upstream>> own_send_queue_;
  SendQueue<Upstream>* send_queue_ = nullptr;
  int lane_ = 0;
  std::thread writer_;
  std::thread reader_;
  wire::Welcome welcome_;
  // Gradients go several slices to a message (shared memory, and the server takes them).
  bool batches_up_ = false;
  std::vector<SendQueue<Upstream>::Item> batch_;  // the writer's, reused
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
  std::atomic<int64_t> bytes_shared_{0};
  int send_track_ = 0;
  int receive_track_ = 0;
  LinkEnd end_;

  absl::Mutex mu_;
  bool writer_done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace p3

#endif  // P3_WORKER_SERVER_CONNECTION_H_
