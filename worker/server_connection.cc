#include "worker/server_connection.h"

#include <grpcpp/grpcpp.h>

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/wire.h"

namespace p3 {

ServerConnection::ServerConnection(const ConnectionOptions& options, const WorkerCore* core,
                                   TransportListener* listener)
    : options_(options),
      core_(core),
      listener_(listener),
      queue_(SendQueueOptions{.priority = options.priority, .credit_bytes = options.credit_bytes}) {
}

absl::StatusOr<std::unique_ptr<ServerConnection>> ServerConnection::Open(
    const ConnectionOptions& options, const ClusterSignature& signature, const WorkerCore* core,
    TransportListener* listener) {
  std::unique_ptr<ServerConnection> conn(new ServerConnection(options, core, listener));
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
  conn->stub_ = wire::ParameterServer::NewStub(channel);
  conn->stream_ = conn->stub_->Train(&conn->context_);
  wire::WorkerMessage first;
  wire::Hello* hello = first.mutable_hello();
  SignatureToHello(signature, hello);
  hello->set_rank(options.rank);
  hello->set_server_index(options.server_index);
  hello->set_token(options.token);
  if (!options.shared_memory_name.empty()) {
    hello->set_shared_memory_name(options.shared_memory_name);
    hello->set_shared_memory_nonce(options.shared_memory_nonce);
  }
  wire::ServerMessage reply;
  if (!conn->stream_->Write(first) || !conn->stream_->Read(&reply)) {
    absl::Status status = FromGrpcStatus(conn->stream_->Finish());
    if (status.ok())
      status = absl::UnavailableError("the server closed the stream during the handshake");
    return absl::Status(status.code(), absl::StrCat("server ", options.server_index, " (",
                                                    options.address, "): ", status.message()));
  }
  if (!reply.has_welcome()) {
    conn->context_.TryCancel();
    conn->stream_->Finish();
    return absl::InternalError(
        absl::StrCat("server ", options.server_index, " answered the Hello without a Welcome"));
  }
  if (reply.welcome().shared_memory() && options.shared_memory_name.empty()) {
    conn->context_.TryCancel();
    conn->stream_->Finish();
    return absl::InternalError(absl::StrCat(
        "server ", options.server_index, " accepted shared memory that was not offered"));
  }
  conn->welcome_ = reply.welcome();
  if (options.trace != nullptr) {
    conn->send_track_ = options.trace->Track(absl::StrCat("send to server ", options.server_index));
    conn->receive_track_ =
        options.trace->Track(absl::StrCat("receive from server ", options.server_index));
  }
  conn->writer_ = std::thread([c = conn.get()] { c->WriteLoop(); });
  conn->reader_ = std::thread([c = conn.get()] { c->ReadLoop(); });
  return conn;
}

ServerConnection::~ServerConnection() { Shutdown(); }

void ServerConnection::Send(const ToServer& message) {
  queue_.Push(message.message, message.priority, message.tiebreak, message.bytes);
}

void ServerConnection::Build(const Upstream& up, int64_t offset, int64_t count,
                             wire::WorkerMessage* msg) const {
  auto fill = [&](wire::SliceData* d) {
    d->set_slice_id(static_cast<uint32_t>(up.slice_id));
    d->set_iteration(up.iteration);
    d->set_offset(static_cast<uint64_t>(offset));
    if (count > 0) {
      d->set_values(reinterpret_cast<const char*>(core_->Values(up, offset)),
                    count * sizeof(float));
    }
  };
  switch (up.kind) {
    case Upstream::Kind::kInit:
      fill(msg->mutable_init());
      break;
    case Upstream::Kind::kGradient:
      fill(msg->mutable_gradient());
      break;
    case Upstream::Kind::kPull:
      msg->mutable_pull()->set_slice_id(static_cast<uint32_t>(up.slice_id));
      msg->mutable_pull()->set_version(up.iteration);
      break;
    case Upstream::Kind::kDone:
      msg->mutable_done();
      break;
  }
}

void ServerConnection::WriteLoop() {
  wire::WorkerMessage msg;
  while (std::optional<PrioritySendQueue<Upstream>::Item> item = queue_.Pop()) {
    msg.Clear();
    const Upstream& up = item->value;
    if (options_.before_write) options_.before_write(up);
    const absl::Time start = absl::Now();
    bool ok = true;
    const bool has_values = up.kind == Upstream::Kind::kInit || up.kind == Upstream::Kind::kGradient;
    if (has_values && shared_memory()) {
      // The server reads the values from the shared buffers: only the descriptor goes.
      Build(up, 0, 0, &msg);
      wire::SliceData* d = up.kind == Upstream::Kind::kInit ? msg.mutable_init()
                                                            : msg.mutable_gradient();
      d->set_shared_count(static_cast<uint64_t>(item->bytes) / sizeof(float));
      ok = stream_->Write(msg);
      bytes_shared_ += item->bytes;
    } else if (has_values) {
      // Values: `bytes` / sizeof(float) of them, in parts of at most max_message_params,
      // back to back.
      ok = WriteInParts(item->bytes / static_cast<int64_t>(sizeof(float)),
                        options_.max_message_params, [&](int64_t offset, int64_t count) {
                          msg.Clear();
                          Build(up, offset, count, &msg);
                          return stream_->Write(msg);
                        });
    } else {
      Build(up, 0, 0, &msg);
      ok = stream_->Write(msg);
    }
    if (options_.trace != nullptr && options_.trace->enabled()) {
      static constexpr const char* kNames[] = {"init", "gradient", "pull", "done"};
      options_.trace->Complete(
          send_track_, absl::StrCat(kNames[static_cast<int>(up.kind)], " ", up.slice_id), "send",
          start, absl::Now(),
          absl::StrCat("\"slice\": ", up.slice_id, ", \"iteration\": ", up.iteration,
                       ", \"bytes\": ", item->bytes));
    }
    if (!(has_values && shared_memory())) bytes_sent_ += item->bytes;
    queue_.Release(item->bytes);
    if (!ok) break;
    if (item->value.kind == Upstream::Kind::kDone) {
      stream_->WritesDone();
      break;
    }
  }
  absl::MutexLock lock(&mu_);
  writer_done_ = true;
}

void ServerConnection::ReadLoop() {
  wire::ServerMessage msg;
  absl::Status abort;
  ReceivedValues received;  // reused: no allocation per message
  while (stream_->Read(&msg)) {
    if (msg.has_params()) {
      const absl::Time start = absl::Now();
      const wire::SliceData& params = msg.params();
      received.segments.clear();
      received.bytes = 0;
      received.in_place_count = 0;
      if (params.shared_count() != 0) {
        if (!shared_memory() || !params.values().empty() ||
            params.shared_count() > static_cast<uint64_t>(INT64_MAX / sizeof(float))) {
          abort = absl::InternalError(absl::StrCat(
              "server ", options_.server_index, " sent slice ", params.slice_id(),
              shared_memory() ? " with values both in the message and in shared memory"
                              : " in shared memory, which this stream did not set up"));
          context_.TryCancel();
          break;
        }
        received.in_place_count = static_cast<int64_t>(params.shared_count());
        bytes_shared_ += received.in_place_count * static_cast<int64_t>(sizeof(float));
      } else {
        received.segments.push_back(params.values());
        received.bytes = params.values().size();
        bytes_received_ += static_cast<int64_t>(received.bytes);
      }
      listener_->OnParams(options_.server_index, params.slice_id(), params.iteration(),
                          params.offset(), received);
      if (options_.trace != nullptr && options_.trace->enabled()) {
        options_.trace->Complete(receive_track_, absl::StrCat("params ", msg.params().slice_id()),
                                 "receive", start, absl::Now(),
                                 absl::StrCat("\"slice\": ", msg.params().slice_id(),
                                              ", \"version\": ", msg.params().iteration(),
                                              ", \"bytes\": ", msg.params().values().size()));
      }
    } else if (msg.has_ack()) {
      listener_->OnAck(options_.server_index, msg.ack().slice_id(), msg.ack().iteration());
    } else if (msg.has_abort()) {
      abort = absl::Status(static_cast<absl::StatusCode>(msg.abort().code()),
                           absl::StrCat("server ", options_.server_index,
                                        " aborted the run: ", msg.abort().message()));
    }
  }
  // The stream is over: stop the writer before Finish().
  queue_.Close();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&writer_done_));
  }
  absl::Status status = FromGrpcStatus(stream_->Finish());
  bool closing;
  {
    absl::MutexLock lock(&mu_);
    closing = closing_;
  }
  if (!abort.ok()) {
    status = abort;
  } else if (!status.ok()) {
    status = absl::Status(status.code(), absl::StrCat("server ", options_.server_index, " (",
                                                      options_.address, "): ", status.message()));
  } else if (!closing) {
    status = absl::UnavailableError(absl::StrCat("server ", options_.server_index,
                                                 " ended the stream before the worker was done"));
  }
  if (!status.ok()) listener_->OnFailure(options_.server_index, status);
  absl::MutexLock lock(&mu_);
  final_status_ = status;
  reader_done_ = true;
}

absl::Status ServerConnection::Close(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  queue_.Push(Upstream{.kind = Upstream::Kind::kDone}, std::numeric_limits<int64_t>::max(), 0, 0);
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithDeadline(absl::Condition(&reader_done_), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("server ", options_.server_index, " did not close the stream in time"));
  }
  return final_status_;
}

void ServerConnection::Shutdown() {
  queue_.Close();
  context_.TryCancel();
  if (writer_.joinable()) writer_.join();
  if (reader_.joinable()) reader_.join();
}

}  // namespace p3
