// A worker's connection to one parameter server over gRPC, the Transport
// (worker/transport.h) of a cluster: one bidirectional Train stream, a priority send
// queue in front of it, a writer thread that keeps exactly one Write in flight, and a
// reader thread that hands the server's messages to a listener. The one place where the
// worker converts between the wire (proto/wire_codec.h: slice values go from the worker's
// buffers into gRPC's slices and back without a protobuf string) and the core's types.
//
// Messages are queued as small descriptors and encoded by the writer thread right before
// they are written: a hand-encoded header plus gRPC slices pointing at the worker's
// buffers (WorkerCore::Values), so values are never copied on the training thread, nor
// into a protobuf string.
//
// Thread-safe. The listener is called from the reader thread.
#ifndef P3_WORKER_SERVER_CONNECTION_H_
#define P3_WORKER_SERVER_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "p3/core/cluster_signature.h"
#include "p3/core/send_queue.h"
#include "p3/core/slice_plan.h"
#include "p3/base/trace.h"
#include "p3/core/worker_core.h"
#include <grpcpp/channel.h>

#include "proto/p3.pb.h"
#include "proto/raw_train.h"
#include "worker/transport.h"

namespace p3 {

struct ConnectionOptions {
  // Index of the server (0 .. S-1) and its host:port.
  int server_index = 0;
  std::string address;
  // This worker's rank and the cluster's shared token, sent in the Hello. Default: 0, "".
  int rank = 0;
  std::string token;
  // Priority order (else FIFO). Default: true.
  bool priority = true;
  // The send order shared with this worker's other connections over the same network
  // link (p3/core/send_queue.h): one priority order and one credit across them. Not owned;
  // must outlive the connection. A connection whose values go through shared memory does
  // not use the link and orders its messages alone. Null: a queue of its own. Default:
  // null.
  SendQueue<Upstream>* link = nullptr;
  // Credit of the queue of its own (when `link` is null or unused), in bytes.
  // Default: 0.
  int64_t credit_bytes = 0;
  // How long to wait for the server to accept the connection; also the keepalive bound.
  // Default: 60 s.
  absl::Duration peer_timeout = absl::Seconds(60);
  // TLS: PEM root certificate(s) to verify the server with; "tls" false: plaintext.
  bool tls = false;
  std::string tls_ca_pem;  // empty: the system's roots
  // Overrides the name checked against the server's certificate. Default: "".
  std::string tls_server_name;
  // The most values one message carries; a larger init or gradient is written as
  // consecutive parts, back to back. Default: kDefaultMaxMessageParams (1,048,576).
  int64_t max_message_params = kDefaultMaxMessageParams;
  // Timeline of writes and receives; not owned, may be null. Default: none.
  TraceRecorder* trace = nullptr;
  // Shared memory holding this worker's parameters and gradients (p3/core/shared_memory.h),
  // offered to the server in the Hello: a server on the same machine maps it, and from
  // then on the values travel through it. Empty name: no offer. Default: none.
  std::string shared_memory_name;
  uint64_t shared_memory_nonce = 0;
  // This process replaces a dead worker of the same rank: the Hello says `rejoin`, and the
  // server must answer with a Welcome that says `rejoined` (docs/protocol.md). Default:
  // false.
  bool rejoin = false;
  // Fault injection for tests: called on the writer thread with each message just before
  // it is written. It may block: the stream then has no write in flight, and later
  // messages wait in the send queue, which orders them. Default: none.
  std::function<void(const Upstream&)> before_write;
};

class ServerConnection : public Transport {
 public:
  // Connects, sends the Hello (`signature`, rank, token) and waits for the Welcome. A
  // refused handshake returns the server's status (e.g. FailedPrecondition: "worker 1
  // refused: tensor 3 ..."). The
  // values of Init and Gradient messages are read from `core`; `core` and `listener`
  // must outlive the connection.
  static absl::StatusOr<std::unique_ptr<ServerConnection>> Open(const ConnectionOptions& options,
                                                                const ClusterSignature& signature,
                                                                const WorkerCore* core,
                                                                TransportListener* listener);
  ~ServerConnection() override;

  // Transport. Send queues a message; smaller priority first (ties by `tiebreak`).
  void Send(const ToServer& message) override;
  absl::Status Close(absl::Time deadline) override;
  void Shutdown() override;
  uint64_t start_version() const override { return welcome_.start_version(); }
  uint64_t current_version() const override { return welcome_.current_version(); }
  bool rejoined() const override { return welcome_.rejoined(); }
  int64_t bytes_sent() const override { return bytes_sent_.load(); }
  int64_t bytes_received() const override { return bytes_received_.load(); }
  int64_t bytes_shared() const override { return bytes_shared_.load(); }

  // The server accepted the shared memory: values travel through it.
  bool shared_memory() const { return welcome_.shared_memory(); }

  // The server's Welcome.
  const wire::Welcome& welcome() const { return welcome_; }

 private:
  ServerConnection(const ConnectionOptions& options, const WorkerCore* core,
                   TransportListener* listener);
  // Writes the values of an Init or Gradient (`bytes` of them): a descriptor when they are
  // in shared memory, else the values themselves, zero-copy, in parts of at most
  // max_message_params.
  bool WriteValues(const Upstream& up, int64_t bytes);
  void WriteLoop();
  void ReadLoop();

  const ConnectionOptions options_;
  const WorkerCore* const core_;
  TransportListener* const listener_;
  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext context_;
  std::unique_ptr<RawTrainClientStream> stream_;
  // The send queue: `link` (a lane of the worker's link), or own_link_.
  std::unique_ptr<SendQueue<Upstream>> own_link_;
  SendQueue<Upstream>* queue_ = nullptr;
  int lane_ = 0;
  std::thread writer_;
  std::thread reader_;
  wire::Welcome welcome_;
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
  std::atomic<int64_t> bytes_shared_{0};
  int send_track_ = 0;
  int receive_track_ = 0;

  absl::Mutex mu_;
  bool writer_done_ ABSL_GUARDED_BY(mu_) = false;
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace p3

#endif  // P3_WORKER_SERVER_CONNECTION_H_
