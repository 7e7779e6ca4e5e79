// ServerConnection's stream on gRPC's callback API (TransportOptions::callback_stream);
// private to server_connection.cc and server_connection_reactor.cc.
//
// Reads: each message read is handed to the connection (HandleMessage) in OnReadDone, on
// the gRPC thread that completed it, and the next read is started there.
//
// Writes: one job in flight (the send queue's one message per lane). When a job's last
// part is written, OnWriteDone releases it and takes the lane's next message in the same
// step (SendQueue::ReleaseAndTryPop), and writes it from there: while the lane has
// messages ready, no thread is woken to write them. When it has none, the lane goes idle,
// and the link thread, blocked in SendQueue::Pop(), takes the next one as the queue
// hands it out and starts its write. With fault injection (before_write) every message
// is taken by the link thread, which calls the hook first, as the synchronous writer does.
//
// The end: the lane is closed when the reads end (the server closed the stream, or a
// message was refused), after a Done has been written, when a write fails, or by
// Shutdown(). The link thread then leaves Pop(), lets the call end (its hold), waits for
// OnDone and settles the link's end (LinkEnd::Ended) with the call's status, off gRPC's
// threads: the listener may wait there.
//
// Thread-safe as used by ServerConnection: Handshake(), then Finish() or Stream(), then
// Join() (or the destructor).
#ifndef P3_WORKER_SERVER_CONNECTION_REACTOR_H_
#define P3_WORKER_SERVER_CONNECTION_REACTOR_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <cstddef>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/wire_codec.h"
#include "worker/server_connection.h"

namespace grpc {
class ChannelInterface;
}  // namespace grpc

namespace p3 {

class ServerConnection::Reactor : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `conn` owns the reactor and outlives it; its context_ is the call's.
  explicit Reactor(ServerConnection* conn) : conn_(conn) {}
  // Waits for the call's end if it was started and never streamed.
  ~Reactor() override;

  // Starts the Train call on `channel` with `hello` as its first message, and waits at
  // most `timeout` for the server's first message and for the Hello's write. true: both
  // came, the first message in *first. false: the stream ended first, or the time ran
  // out (*timed_out; the call is cancelled). Once.
  bool Handshake(grpc::ChannelInterface* channel, grpc::ByteBuffer hello, absl::Duration timeout,
                 grpc::ByteBuffer* first, bool* timed_out);

  // After a failed or refused handshake (the caller cancels first where the call is
  // still up): waits for the call's end and returns its status.
  grpc::Status Finish();

  // After a good handshake, the connection's lane ready: starts reading and the link
  // thread.
  void Stream();

  // Waits for the link thread, which ends after the call (ServerConnection::Shutdown
  // closes the lane and cancels first). Safe to call twice.
  void Join();

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // The link thread: starts the writes of the messages Pop() hands out, then settles the
  // link's end.
  void LinkLoop();
  // gRPC's thread that runs a reaction yields to the computation as the link threads do
  // (batch_io_threads: SCHED_BATCH), once per thread.
  void YieldOnce();
  // Writes job_'s part `part_` (the caller owns job_: the link thread between Pop() and
  // the write's start, OnWriteDone otherwise).
  void WritePart();

  ServerConnection* const conn_;
  grpc::ByteBuffer hello_;
  grpc::ByteBuffer read_;       // the read in flight's, then handled
  WriteJob job_;                // the write in flight's
  size_t part_ = 0;
  DecodedServerMessage msg_;    // OnReadDone's, reused
  ReceivedValues received_;     // OnReadDone's, reused
  std::atomic<bool> streaming_{false};  // after the handshake
  bool started_ = false;        // the call was started (Handshake)
  std::thread link_;

  absl::Mutex mu_;
  bool hello_written_ ABSL_GUARDED_BY(mu_) = false;
  bool first_in_ ABSL_GUARDED_BY(mu_) = false;
  bool first_ok_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // a message malformed or refused
  absl::Status abort_ ABSL_GUARDED_BY(mu_);    // the server's Abort
};

}  // namespace p3

#endif  // P3_WORKER_SERVER_CONNECTION_REACTOR_H_
