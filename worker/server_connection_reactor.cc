#include "worker/server_connection_reactor.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "p3/base/thread_name.h"
#include "proto/raw_train.h"
#include "proto/wire.h"

namespace p3 {

ServerConnection::Reactor::~Reactor() {
  Join();
  if (started_ && !streaming_) Finish();
}

bool ServerConnection::Reactor::Handshake(grpc::ChannelInterface* channel, grpc::ByteBuffer hello,
                                          absl::Duration timeout, grpc::ByteBuffer* first,
                                          bool* timed_out) {
  // Created by path, as OpenRawTrain's synchronous call (proto/raw_train.h).
  const grpc::internal::RpcMethod method(kTrainMethodPath,
                                         grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::internal::ClientCallbackReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
      channel, method, &conn_->context_, this);
  hello_ = std::move(hello);
  StartWrite(&hello_);
  StartRead(&read_);
  StartCall();
  started_ = true;
  absl::MutexLock lock(&mu_);
  // The Hello's write completes too before the stream goes on: one write in flight.
  auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return first_in_ && hello_written_;
  };
  *timed_out = !mu_.AwaitWithTimeout(absl::Condition(&answered), timeout);
  if (*timed_out) {
    conn_->context_.TryCancel();
    return false;
  }
  if (!first_ok_) return false;
  first->Swap(&read_);
  return true;
}

grpc::Status ServerConnection::Reactor::Finish() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return status_;
}

void ServerConnection::Reactor::Stream() {
  streaming_ = true;
  // The link thread's hold: the call does not end (OnDone) before the thread has stopped
  // starting writes.
  AddHold();
  link_ = std::thread([this] {
    NameThisThread(absl::StrCat("p3-link-s", conn_->options_.server_index));
    conn_->YieldToComputation();
    LinkLoop();
  });
  StartRead(&read_);
}

void ServerConnection::Reactor::Join() {
  if (link_.joinable()) link_.join();
}

void ServerConnection::Reactor::YieldOnce() {
  thread_local bool yielded = false;
  if (yielded) return;
  yielded = true;
  conn_->YieldToComputation();
}

void ServerConnection::Reactor::WritePart() {
  const WriteJob::Part& part = job_.parts[part_];
  StartWrite(&part.buffer, part.write_through ? grpc::WriteOptions().set_write_through()
                                              : grpc::WriteOptions());
}

void ServerConnection::Reactor::LinkLoop() {
  SendQueue<Upstream>* queue = conn_->send_queue_;
  while (std::optional<SendQueue<Upstream>::Item> item = queue->Pop(conn_->lane_)) {
    if (conn_->options_.before_write) conn_->options_.before_write(item->value);
    conn_->MakeJob(*std::move(item), &job_);
    part_ = 0;
    WritePart();
  }
  // The lane is closed: nothing more is written. The call may end now.
  RemoveHold();
  grpc::Status status;
  absl::Status failure, abort;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    status = status_;
    failure = failure_;
    abort = abort_;
  }
  const absl::Status finished = FromGrpcStatus(status);
  conn_->end_.Ended(abort, failure, finished.ok() ? finished : conn_->end_.Named(finished));
}

void ServerConnection::Reactor::OnWriteDone(bool ok) {
  if (!streaming_) {
    absl::MutexLock lock(&mu_);
    hello_written_ = true;
    return;
  }
  YieldOnce();
  if (ok && ++part_ < job_.parts.size()) {
    WritePart();
    return;
  }
  conn_->TraceJob(job_);
  SendQueue<Upstream>* queue = conn_->send_queue_;
  const int lane = conn_->lane_;
  if (!ok || job_.done) {
    queue->Release(lane, job_.bytes);
    if (ok) StartWritesDone();  // after the Done
    // Nothing more goes out on this lane: its queued messages must not hold up the others.
    queue->Close(lane);
    return;
  }
  if (conn_->options_.before_write) {
    queue->Release(lane, job_.bytes);  // the link thread takes the next, and calls the hook
    return;
  }
  std::optional<SendQueue<Upstream>::Item> next = queue->ReleaseAndTryPop(lane, job_.bytes);
  if (!next.has_value()) return;  // the lane is idle: the link thread takes the next
  conn_->MakeJob(*std::move(next), &job_);
  part_ = 0;
  WritePart();
}

void ServerConnection::Reactor::OnReadDone(bool ok) {
  if (!streaming_) {
    absl::MutexLock lock(&mu_);
    first_in_ = true;
    first_ok_ = ok;
    return;
  }
  YieldOnce();
  if (!ok) {
    // The stream is over: the link thread stops writing.
    conn_->send_queue_->Close(conn_->lane_);
    return;
  }
  absl::Status abort;
  const absl::Status failure = conn_->HandleMessage(&read_, &msg_, &received_, &abort);
  if (!abort.ok()) {
    absl::MutexLock lock(&mu_);
    abort_ = abort;
  }
  if (!failure.ok()) {
    {
      absl::MutexLock lock(&mu_);
      failure_ = failure;
    }
    // The link is over: what follows the refused message cannot be trusted either.
    conn_->context_.TryCancel();
    conn_->send_queue_->Close(conn_->lane_);
    return;
  }
  StartRead(&read_);
}

void ServerConnection::Reactor::OnDone(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  status_ = status;
  done_ = true;
}

}  // namespace p3
