#include "worker/server_connection.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <iostream>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "p3/base/log_line.h"
#include "p3/base/status_macros.h"
#include "p3/base/thread_name.h"
#include "p3/base/thread_policy.h"
#include "p3/core/stall_report.h"
#include "p3/core/wire_dtype.h"
#include "proto/raw_train.h"
#include "proto/wire.h"

namespace p3 {
namespace {

// Upstream's counters go into the wire's messages (proto/p3.proto) here and in ToWire: a
// gradient's iteration through SliceHeader::set_iteration (an Init's is 0; proto/wire_codec.h
// maps SliceData's field to its meanings); Pull and Resume carry a `version`, Buffers a
// `round`, Replan `from_iteration` and `slice_params`.
SliceHeader SliceHeaderOf(const Upstream& up) {
  SliceHeader header;
  header.slice_id = static_cast<uint32_t>(up.slice_id);
  header.set_iteration(up.kind == Upstream::Kind::kGradient ? up.iteration : 0);
  // float32, or the 16-bit wire's dtype with (float16) the slice's scale: the same for
  // every part, and also on a shared-memory descriptor, where the server applies it.
  header.has_scale_exponent = up.encoding.scale_exponent.has_value();
  header.scale_exponent = up.encoding.scale_exponent.value_or(0);
  return header;
}

// A control message (any kind but Init and Gradient) as the wire's WorkerMessage.
void ToWire(const Upstream& up, wire::WorkerMessage* msg) {
  msg->Clear();
  switch (up.kind) {
    case Upstream::Kind::kPull:
      msg->mutable_pull()->set_slice_id(static_cast<uint32_t>(up.slice_id));
      msg->mutable_pull()->set_version(up.version);
      break;
    case Upstream::Kind::kDone:
      msg->mutable_done();
      break;
    case Upstream::Kind::kBuffers:
      msg->mutable_buffers()->set_round(up.round);
      msg->mutable_buffers()->set_values(up.buffers->data(), up.buffers->size() * sizeof(float));
      break;
    case Upstream::Kind::kResume:
      msg->mutable_resume()->set_version(up.version);
      break;
    case Upstream::Kind::kReplan:
      msg->mutable_replan()->set_from_iteration(up.from_iteration);
      msg->mutable_replan()->set_slice_params(up.slice_params);
      break;
    case Upstream::Kind::kMembership:
      msg->mutable_membership()->set_from_iteration(up.from_iteration);
      for (int r : *up.present) msg->mutable_membership()->add_present(static_cast<uint32_t>(r));
      break;
    case Upstream::Kind::kReached:
      msg->mutable_reached()->set_version(up.version);
      break;
    case Upstream::Kind::kInit:
    case Upstream::Kind::kGradient:
      break;
  }
}

// The trace's argument for a message's counter, named as the wire names it.
std::string TraceCounter(const Upstream& up) {
  switch (up.kind) {
    case Upstream::Kind::kPull:
    case Upstream::Kind::kResume:
    case Upstream::Kind::kReached:
      return absl::StrCat("\"version\": ", up.version);
    case Upstream::Kind::kBuffers:
      return absl::StrCat("\"round\": ", up.round);
    case Upstream::Kind::kReplan:
    case Upstream::Kind::kMembership:
      return absl::StrCat("\"from_iteration\": ", up.from_iteration);
    case Upstream::Kind::kInit:
    case Upstream::Kind::kGradient:
    case Upstream::Kind::kDone:
      break;
  }
  return absl::StrCat("\"iteration\": ", up.iteration);
}

}  // namespace

ServerConnection::ServerConnection(const TransportOptions& options)
    : options_(options), end_(options.server_index, options.address, "stream", options.listener) {}

absl::StatusOr<std::unique_ptr<ServerConnection>> ServerConnection::Open(
    const TransportOptions& options) {
  if (options.core == nullptr || options.listener == nullptr) {
    return absl::InvalidArgumentError("a connection needs a core and a listener");
  }
  std::unique_ptr<ServerConnection> conn(new ServerConnection(options));
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args = ChannelArgs(options.peer_timeout);
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.address, credentials, args);
  const absl::Time deadline = absl::Now() + options.peer_timeout;
  if (!channel->WaitForConnected(absl::ToChronoTime(deadline))) {
    return absl::UnavailableError(absl::StrCat("server ", options.server_index, " at ",
                                               options.address, " did not answer within ",
                                               absl::FormatDuration(options.peer_timeout),
                                               " (is it up, and do both sides agree on TLS?)"));
  }
  conn->channel_ = channel;
  conn->stream_ = OpenRawTrain(channel.get(), &conn->context_);
  wire::WorkerMessage first;
  wire::Hello* hello = first.mutable_hello();
  SignatureToHello(options.signature, hello);
  hello->set_rank(options.rank);
  hello->set_server_index(options.server_index);
  hello->set_token(options.token);
  hello->set_rejoin(options.rejoin);
  hello->set_takes_plan(true);  // Connect() takes the Welcome's plan (WorkerCore::TakePlan)
  if (!options.shared_memory_name.empty()) {
    hello->set_shared_memory_name(options.shared_memory_name);
    hello->set_shared_memory_nonce(options.shared_memory_nonce);
    hello->set_takes_shared_batches(true);  // ReceiveSharedParams
  }
  grpc::ByteBuffer buffer;
  // The handshake is bounded by peer_timeout like everything else: a server that accepts
  // the stream and never answers is cancelled instead of hanging the worker.
  absl::Notification answered;
  std::atomic<bool> timed_out{false};
  std::thread watchdog([&] {
    if (!answered.WaitForNotificationWithTimeout(options.peer_timeout)) {
      timed_out = true;
      conn->context_.TryCancel();
    }
  });
  const bool replied = conn->stream_->Write(EncodeMessage(first)) && conn->stream_->Read(&buffer);
  answered.Notify();
  watchdog.join();
  if (!replied || timed_out) {
    absl::Status status = FromGrpcStatus(conn->stream_->Finish());
    if (timed_out) {
      status = absl::DeadlineExceededError(absl::StrCat("no Welcome within ",
                                                        absl::FormatDuration(options.peer_timeout),
                                                        " (peer_timeout) after the Hello"));
    } else if (status.ok()) {
      status = absl::UnavailableError("the server closed the stream during the handshake");
    }
    return conn->end_.Named(status);
  }
  DecodedServerMessage reply;
  const absl::Status decoded = Decode(&buffer, &reply);
  if (!decoded.ok() || reply.field != wire::ServerMessage::kWelcomeFieldNumber) {
    conn->context_.TryCancel();
    conn->stream_->Finish();
    return absl::InternalError(
        absl::StrCat("server ", options.server_index, " answered the Hello without a Welcome",
                     decoded.ok() ? "" : absl::StrCat(" (", decoded.message(), ")")));
  }
  // A Hello with rejoin may be answered either way: not rejoined means the server is a
  // new process (restarted too) and the worker starts there as at a first start
  // (WorkerCore::Resume). The other way round is a server that does not follow the
  // protocol.
  if (reply.control.welcome().rejoined() && !options.rejoin) {
    conn->context_.TryCancel();
    conn->stream_->Finish();
    return absl::InternalError(
        absl::StrCat("server ", options.server_index, " took the Hello as a rejoin"));
  }
  if (reply.control.welcome().shared_memory() && options.shared_memory_name.empty()) {
    conn->context_.TryCancel();
    conn->stream_->Finish();
    return absl::InternalError(absl::StrCat("server ", options.server_index,
                                            " accepted shared memory that was not offered"));
  }
  conn->welcome_ = reply.control.welcome();
  // Fault injection (before_write) sees one slice per write, as it does on any link.
  conn->batches_up_ =
      conn->shared_memory() && conn->welcome_.takes_shared_batches() && !options.before_write;
  // Values through shared memory do not use the network link: such a connection orders
  // its messages alone instead of taking turns with the others.
  if (options.send_queue != nullptr && !conn->shared_memory()) {
    conn->send_queue_ = options.send_queue;
  } else {
    conn->own_send_queue_ = std::make_unique<SendQueue<Upstream>>(SendQueueOptions{
        .priority = options.signature.priority,
        .credit_bytes = options.credit_bytes,
        .stalled_after = options.stalled_write});
    conn->send_queue_ = conn->own_send_queue_.get();
  }
  conn->lane_ = conn->send_queue_->AddLane();
  if (options.trace != nullptr) {
    conn->send_track_ = options.trace->Track(absl::StrCat("send to server ", options.server_index));
    conn->receive_track_ =
        options.trace->Track(absl::StrCat("receive from server ", options.server_index));
  }
  // Named for profiles and wake-up counts (docs/results/streaming/streaming.md).
  conn->writer_ = std::thread([c = conn.get()] {
    NameThisThread(absl::StrCat("p3-send-s", c->options_.server_index));
    c->YieldToComputation();
    c->WriteLoop();
  });
  conn->reader_ = std::thread([c = conn.get()] {
    NameThisThread(absl::StrCat("p3-recv-s", c->options_.server_index));
    c->YieldToComputation();
    c->ReadLoop();
  });
  return conn;
}

ServerConnection::~ServerConnection() { Shutdown(); }

void ServerConnection::YieldToComputation() {
  if (!options_.batch_io_threads) return;
  if (absl::Status s = ScheduleThisThreadAsBatch(); !s.ok()) {
    LogLine(absl::StrCat("worker ", options_.rank, ": server ", options_.server_index,
                         "'s link threads keep their CPU policy: ", s.message()));
  }
}

void ServerConnection::Send(const ToServer& message) {
  send_queue_->Push(lane_, message.message, message.priority, message.tiebreak, message.bytes);
}

bool ServerConnection::WriteValues(const Upstream& up) {
  SliceHeader header = SliceHeaderOf(up);
  const int field = up.kind == Upstream::Kind::kInit ? wire::WorkerMessage::kInitFieldNumber
                                                     : wire::WorkerMessage::kGradientFieldNumber;
  const ValueEncoding& encoding = up.encoding;
  const int64_t width = static_cast<int64_t>(BytesPerValue(encoding.dtype));
  const int64_t n = up.length;
  if (shared_memory()) {
    // The server reads the values from the shared buffers: only the descriptor goes.
    header.shared_count = static_cast<uint64_t>(n);
    bytes_shared_ += n * width;
    return stream_->Write(EncodeSlice(field, header, nullptr, 0, nullptr));
  }
  // Write-through: the write completes once the bytes are in the kernel, not when gRPC
  // has merely buffered them, so that the send queue's credit counts what is really
  // still waiting above the socket.
  const grpc::WriteOptions through = grpc::WriteOptions().set_write_through();
  bytes_sent_ += n * width;
  if (encoding.dtype != WireDType::kFloat32) {
    // Encoded straight from the gradient buffer into the memory of the slice gRPC sends:
    // the conversion replaces the copy, and the buffer is gRPC's to free.
    return WriteInParts(n, options_.max_message_params, [&](int64_t offset, int64_t count) {
      header.offset = static_cast<uint64_t>(offset);
      grpc::Slice values(static_cast<size_t>(count * width));
      EncodeValues(encoding.dtype, up.values + offset, count, encoding.scale_exponent.value_or(0),
                   const_cast<uint8_t*>(values.begin()));
      return stream_->Write(EncodeSlice(field, header, std::move(values)), through);
    });
  }
  // No copy: gRPC's slices point into the worker's buffers, which the protocol keeps
  // unchanged until the server has received them (p3/core/to_server.h).
  return WriteInParts(n, options_.max_message_params, [&](int64_t offset, int64_t count) {
    header.offset = static_cast<uint64_t>(offset);
    return stream_->Write(
        EncodeSlice(field, header, up.values + offset, count * sizeof(float), nullptr), through);
  });
}

bool ServerConnection::WriteSharedGradients(SendQueue<Upstream>::Item first, absl::Time start) {
  batch_.clear();
  batch_.push_back(std::move(first));
  // Only what is ready now, in the queue's order: a batch is never waited for.
  const int64_t bytes = send_queue_->PopAlsoInto(
      lane_, [](const Upstream& up) { return up.kind == Upstream::Kind::kGradient; },
      kSharedBatchSend, &batch_);
  bool ok = true;
  if (batch_.size() == 1) {
    ok = WriteValues(batch_[0].value);
  } else {
    wire::WorkerMessage msg;
    wire::SharedSlices* slices = msg.mutable_shared_gradients();
    for (const SendQueue<Upstream>::Item& item : batch_) {
      const Upstream& up = item.value;
      SliceHeader header = SliceHeaderOf(up);
      header.shared_count = static_cast<uint64_t>(up.length);
      SetHeader(header, slices->add_slices());
      bytes_shared_ += up.length * static_cast<int64_t>(BytesPerValue(up.encoding.dtype));
    }
    ok = stream_->Write(EncodeMessage(msg));
  }
  for (const SendQueue<Upstream>::Item& item : batch_) TraceWrite(item.value, item.bytes, start);
  send_queue_->Release(lane_, bytes);
  batch_.clear();
  return ok;
}

void ServerConnection::TraceWrite(const Upstream& up, int64_t bytes, absl::Time start) {
  if (options_.trace == nullptr || !options_.trace->enabled()) return;
  static constexpr const char* kNames[] = {"init",   "gradient", "pull",   "done",
                                           "resume", "buffers",  "replan", "membership"};
  options_.trace->Complete(
      send_track_, absl::StrCat(kNames[static_cast<int>(up.kind)], " ", up.slice_id), "send", start,
      absl::Now(),
      absl::StrCat("\"slice\": ", up.slice_id, ", ", TraceCounter(up), ", \"bytes\": ", bytes));
}

void ServerConnection::WriteLoop() {
  wire::WorkerMessage msg;  // control messages only
  while (std::optional<SendQueue<Upstream>::Item> item = send_queue_->Pop(lane_)) {
    const Upstream& up = item->value;
    if (options_.before_write) options_.before_write(up);
    const absl::Time start = absl::Now();
    if (batches_up_ && up.kind == Upstream::Kind::kGradient) {
      if (!WriteSharedGradients(*std::move(item), start)) break;
      continue;
    }
    bool ok = true;
    if (up.kind == Upstream::Kind::kInit || up.kind == Upstream::Kind::kGradient) {
      ok = WriteValues(up);
    } else {
      ToWire(up, &msg);
      if (up.kind == Upstream::Kind::kBuffers) bytes_sent_ += item->bytes;
      ok = stream_->Write(EncodeMessage(msg));
    }
    TraceWrite(up, item->bytes, start);
    send_queue_->Release(lane_, item->bytes);
    if (!ok) break;
    if (up.kind == Upstream::Kind::kDone) {
      stream_->WritesDone();
      break;
    }
  }
  // Nothing more goes out on this lane: its queued messages must not hold up the others.
  send_queue_->Close(lane_);
  absl::MutexLock lock(&mu_);
  writer_done_ = true;
}

absl::Status ServerConnection::ReceiveParams(const DecodedServerMessage& msg,
                                             ReceivedValues* received) {
  const SliceHeader& h = msg.header;
  if (h.shared_count != 0) {
    if (!shared_memory() || msg.value_bytes != 0) {
      return absl::InternalError(
          absl::StrCat("server ", options_.server_index, " sent slice ", h.slice_id,
                       shared_memory() ? " with values both in the message and in shared memory"
                                       : " in shared memory, which this stream did not set up"));
    }
    return ReceiveInPlace(h, received);
  }
  received->segments.assign(msg.values.begin(), msg.values.end());
  received->bytes = msg.value_bytes;
  received->in_place_count = 0;
  received->scale_exponent.reset();
  if (h.has_scale_exponent) received->scale_exponent = h.scale_exponent;
  bytes_received_ += static_cast<int64_t>(received->bytes);
  return options_.core->Params(options_.server_index, h.slice_id, h.version(), h.offset, *received)
      .status();
}

absl::Status ServerConnection::ReceiveInPlace(const SliceHeader& h, ReceivedValues* received) {
  if (h.shared_count > static_cast<uint64_t>(INT64_MAX / sizeof(float))) {
    return absl::InternalError(absl::StrCat("server ", options_.server_index, " sent slice ",
                                            h.slice_id, " with shared_count ", h.shared_count,
                                            ", out of range"));
  }
  received->segments.clear();
  received->bytes = 0;
  received->scale_exponent.reset();
  if (h.has_scale_exponent) received->scale_exponent = h.scale_exponent;
  received->in_place_count = static_cast<int64_t>(h.shared_count);
  // Counted as the stream would have carried them (2 bytes a value on a 16-bit wire).
  bytes_shared_ +=
      received->in_place_count * static_cast<int64_t>(BytesPerValue(options_.signature.wire_dtype));
  return options_.core->Params(options_.server_index, h.slice_id, h.version(), h.offset, *received)
      .status();
}

absl::Status ServerConnection::ReceiveSharedParams(const wire::SharedSlices& batch,
                                                   ReceivedValues* received) {
  const int n = batch.slices_size();
  // The whole message's form first: a malformed one hands the core nothing.
  if (!shared_memory() || n == 0 || n > kSharedBatchMax) {
    return absl::InternalError(absl::StrCat(
        "server ", options_.server_index, " sent a SharedSlices message of ", n, " slices",
        shared_memory() ? absl::StrCat(" (1 to ", kSharedBatchMax, " allowed)")
                        : " on a stream without shared memory"));
  }
  for (int i = 0; i < n; ++i) {
    const wire::SliceData& d = batch.slices(i);
    if (d.shared_count() == 0 || !d.values().empty()) {
      return absl::InternalError(absl::StrCat("server ", options_.server_index, " sent slice ",
                                              d.slice_id(),
                                              " in a SharedSlices message with values in the "
                                              "message, not only in shared memory"));
    }
    for (int j = 0; j < i; ++j) {
      if (batch.slices(j).slice_id() == d.slice_id()) {
        return absl::InternalError(absl::StrCat("server ", options_.server_index,
                                                " sent a SharedSlices message naming slice ",
                                                d.slice_id(), " twice"));
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    const absl::Time start = absl::Now();
    const SliceHeader h = HeaderOf(batch.slices(i));
    P3_RETURN_IF_ERROR(ReceiveInPlace(h, received));
    if (options_.trace != nullptr && options_.trace->enabled()) {
      options_.trace->Complete(receive_track_, absl::StrCat("params ", h.slice_id), "receive",
                               start, absl::Now(),
                               absl::StrCat("\"slice\": ", h.slice_id,
                                            ", \"version\": ", h.version(), ", \"bytes\": 0"));
    }
  }
  return absl::OkStatus();
}

void ServerConnection::ReadLoop() {
  // All reused from message to message: no allocation per slice.
  grpc::ByteBuffer buffer;
  DecodedServerMessage msg;
  ReceivedValues received;
  absl::Status failure;  // this link's own: a message malformed or refused by the core
  absl::Status abort;    // the server's Abort
  while (stream_->Read(&buffer)) {
    if (absl::Status decoded = Decode(&buffer, &msg); !decoded.ok()) {
      failure = absl::InternalError(absl::StrCat("server ", options_.server_index,
                                                 " sent a malformed message: ", decoded.message()));
    } else if (msg.is_slice) {
      const absl::Time start = absl::Now();
      failure = ReceiveParams(msg, &received);
      if (options_.trace != nullptr && options_.trace->enabled()) {
        options_.trace->Complete(receive_track_, absl::StrCat("params ", msg.header.slice_id),
                                 "receive", start, absl::Now(),
                                 absl::StrCat("\"slice\": ", msg.header.slice_id,
                                              ", \"version\": ", msg.header.version(),
                                              ", \"bytes\": ", msg.value_bytes));
      }
    } else if (msg.control.has_shared_params()) {
      failure = ReceiveSharedParams(msg.control.shared_params(), &received);
    } else if (msg.control.has_ack()) {
      // Answered on this stream, without a trip through the worker.
      absl::StatusOr<ToServer> pull = options_.core->Ack(
          options_.server_index, msg.control.ack().slice_id(), msg.control.ack().iteration());
      if (pull.ok()) {
        Send(*pull);
      } else {
        failure = pull.status();
      }
    } else if (msg.control.has_stall()) {
      const wire::Stall& stall = msg.control.stall();
      std::vector<int> ranks(stall.missing_ranks().begin(), stall.missing_ranks().end());
      LogLine(absl::StrCat("[stall] worker ", options_.rank, ": server ", options_.server_index,
                           " has waited ", absl::StrFormat("%.1f", stall.waited_s()),
                           " s for the gradients of iteration ", stall.iteration(),
                           " from worker", ranks.size() == 1 ? " " : "s ", ListIds(ranks)));
      options_.listener->OnStall(options_.server_index, stall.iteration(), ranks);
    } else if (msg.control.has_membership()) {
      const std::vector<int> present(msg.control.membership().present().begin(),
                                     msg.control.membership().present().end());
      options_.listener->OnMembership(options_.server_index,
                                      msg.control.membership().from_iteration(), present);
    } else if (msg.control.has_replan()) {
      options_.listener->OnReplan(options_.server_index, msg.control.replan().from_iteration(),
                                  msg.control.replan().slice_params());
    } else if (msg.control.has_buffers()) {
      bytes_received_ += static_cast<int64_t>(msg.control.buffers().values().size());
      options_.listener->OnBuffers(options_.server_index, msg.control.buffers().round(),
                                   msg.control.buffers().values());
    } else if (msg.control.has_abort()) {
      abort = absl::Status(static_cast<absl::StatusCode>(msg.control.abort().code()),
                           absl::StrCat("server ", options_.server_index,
                                        " aborted the run: ", msg.control.abort().message()));
    }
    if (!failure.ok()) {
      // The link is over: what follows the refused message cannot be trusted either.
      context_.TryCancel();
      break;
    }
  }
  // The stream is over: stop the writer before Finish().
  send_queue_->Close(lane_);
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&writer_done_));
  }
  const absl::Status finished = FromGrpcStatus(stream_->Finish());
  end_.Ended(abort, failure, finished.ok() ? finished : end_.Named(finished));
}

absl::Status ServerConnection::Close(absl::Time deadline) {
  end_.Closing();
  send_queue_->Push(lane_, Upstream{.kind = Upstream::Kind::kDone},
                    std::numeric_limits<int64_t>::max(), 0, 0);
  return end_.Await(deadline);
}

void ServerConnection::Shutdown() {
  if (send_queue_ != nullptr) send_queue_->Close(lane_);
  context_.TryCancel();
  if (writer_.joinable()) writer_.join();
  if (reader_.joinable()) reader_.join();
}

}  // namespace p3
