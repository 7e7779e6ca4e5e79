#include "server/parameter_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <cstring>
#include <limits>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "p3/send_queue.h"
#include "p3/shared_memory.h"
#include "p3/slice_plan.h"
#include "p3/status_macros.h"
#include "proto/p3.grpc.pb.h"
#include "proto/wire.h"
#include "server/message_handler.h"

namespace p3 {
namespace {

using TrainStream = grpc::ServerReaderWriter<wire::ServerMessage, wire::WorkerMessage>;

// One message waiting to go down a stream.
struct Pending {
  enum class Kind { kWelcome, kOutgoing, kAbort };
  Kind kind = Kind::kOutgoing;
  Outgoing out;
  absl::Status abort;
};

// The shard hands its checkpoints to the server's writer thread instead of running
// `on_checkpoint` on the stream handler that completed the iteration.
ShardOptions WithCheckpointWriter(ShardOptions shard, CheckpointWriter* writer) {
  if (writer != nullptr) {
    shard.on_checkpoint = [writer](ShardCheckpoint c) { writer->Submit(std::move(c)); };
  }
  return shard;
}

}  // namespace

class ParameterServer::Impl final : public wire::ParameterServer::Service {
 public:
  explicit Impl(const ServerOptions& options)
      : options_(options),
        checkpoint_writer_(options.shard.on_checkpoint
                               ? std::make_unique<CheckpointWriter>(options.shard.on_checkpoint)
                               : nullptr),
        shard_(WithCheckpointWriter(options.shard, checkpoint_writer_.get())) {}

  absl::Status Start() {
    grpc::ServerBuilder builder;
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    if (!options_.tls_cert_pem.empty() || !options_.tls_key_pem.empty()) {
      grpc::SslServerCredentialsOptions ssl;
      ssl.pem_key_cert_pairs.push_back({options_.tls_key_pem, options_.tls_cert_pem});
      credentials = grpc::SslServerCredentials(ssl);
    }
    builder.AddListeningPort(options_.address, credentials, &port_);
    builder.RegisterService(this);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    // The same keepalive settings as the workers' channels (proto/wire.h).
    for (const auto& [name, value] : KeepaliveChannelArgs(options_.peer_timeout)) {
      builder.AddChannelArgument(name, value);
    }
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.address));
    }
    return absl::OkStatus();
  }

  grpc::Status Train(grpc::ServerContext* context, TrainStream* stream) override {
    return ToGrpcStatus(Serve(context, stream));
  }

  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Impl* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
          return self->all_done_ || !self->failure_.ok();
        },
        this));
    return failure_;
  }

  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) return;
      shut_down_ = true;
      // After a clean finish the handlers are returning OK on their own; cancelling them
      // now would turn a worker's clean close into CANCELLED.
      if (!all_done_) {
        if (failure_.ok()) {
          failure_ = absl::CancelledError("server shut down");
        } else {
          // The run failed: the other workers' streams are writing their Abort, which
          // says why, and end by themselves. Give them a moment before cutting them off.
          mu_.AwaitWithTimeout(
              absl::Condition(
                  +[](std::map<int, Connection*>* streams) { return streams->empty(); }, &streams_),
              absl::Seconds(2));
        }
        for (auto& [rank, conn] : streams_) {
          conn->queue.Close();
          conn->context->TryCancel();
        }
      }
    }
    // Waits for the handlers still running, and cancels them after the grace period.
    if (server_ != nullptr)
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    // No handler cuts a checkpoint any more: the queued ones are written before this returns.
    if (checkpoint_writer_ != nullptr) checkpoint_writer_->Shutdown();
  }

  int port() const { return port_; }
  const ParameterShard& shard() const { return shard_; }

 private:
  struct Connection {
    int rank = 0;
    grpc::ServerContext* context = nullptr;
    PrioritySendQueue<Pending> queue;
    int receive_track = 0;
    int send_track = 0;
    // The worker's shared memory and the plan locating slices in it; set before the
    // stream's threads start, null when the values go over the stream.
    std::unique_ptr<SharedRegion> shared;
    std::optional<SlicePlan> plan;
    SharedValues shared_values;
    Connection(bool priority, int64_t credit_bytes)
        : queue(SendQueueOptions{.priority = priority, .credit_bytes = credit_bytes}) {}
  };

  absl::Status Serve(grpc::ServerContext* context, TrainStream* stream) {
    wire::WorkerMessage first;
    if (!stream->Read(&first)) return absl::CancelledError("stream closed before the Hello");
    if (!first.has_hello()) return absl::InvalidArgumentError("the first message must be a Hello");
    const wire::Hello& hello = first.hello();
    if (!TokenMatches(hello.token())) {
      return absl::UnauthenticatedError(
          absl::StrCat("worker ", hello.rank(), " refused: missing or wrong cluster token"));
    }
    // Join and registration happen under mu_, so that the initial values another thread
    // dispatches for this worker find its queue.
    std::unique_ptr<Connection> conn;
    std::vector<Outgoing> initial;
    int rank = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return failure_;
      // Refused: only this stream ends.
      P3_ASSIGN_OR_RETURN(HelloResult joined,
                          HandleHello(&shard_, hello, options_.shard.server_index));
      rank = joined.rank;
      initial = std::move(joined.out);
      conn = std::make_unique<Connection>(joined.signature.priority, options_.credit_bytes);
      conn->rank = rank;
      conn->context = context;
      if (!hello.shared_memory_name().empty() && options_.shared_memory) {
        MapSharedMemory(hello, conn.get());
      }
      // The Welcome goes first, also in FIFO order: queued before anyone can see the queue.
      conn->queue.Push(Pending{.kind = Pending::Kind::kWelcome},
                       std::numeric_limits<int64_t>::min(), 0, 0);
      streams_[rank] = conn.get();
    }
    Connection& connection = *conn;
    Dispatch(initial);
    if (tracing()) {
      connection.receive_track = options_.trace->Track(absl::StrCat("from worker ", rank));
      connection.send_track = options_.trace->Track(absl::StrCat("to worker ", rank));
    }
    std::thread writer([this, &connection, stream] { WriteLoop(&connection, stream); });

    absl::Status status = ReadLoop(rank, connection, stream);
    if (!status.ok()) Fail(rank, status);
    connection.queue.Close();
    writer.join();
    {
      absl::MutexLock lock(&mu_);
      streams_.erase(rank);
    }
    return status;
  }

  // Reads until the worker's Done (OK) or an error.
  absl::Status ReadLoop(int rank, const Connection& conn, TrainStream* stream) {
    const int track = conn.receive_track;
    const SharedValues* shared = conn.shared != nullptr ? &conn.shared_values : nullptr;
    wire::WorkerMessage msg;
    Handled handled;  // reused: no allocation per message
    while (stream->Read(&msg)) {
      const absl::Time start = absl::Now();
      P3_RETURN_IF_ERROR(HandleWorkerMessage(&shard_, rank, msg, &handled, shared));
      if (handled.done) {
        if (handled.all_done) {
          absl::MutexLock lock(&mu_);
          all_done_ = true;
        }
        return absl::OkStatus();
      }
      if (tracing()) Trace(track, msg, handled.out, start);
      Dispatch(handled.out);
      // The queues hold their own references: dropping ours now lets the shard reuse a
      // snapshot's buffer as soon as the messages are written.
      handled.out.clear();
    }
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return failure_;
    }
    return absl::UnavailableError(
        absl::StrCat("worker ", rank, " disconnected before it was done"));
  }

  // Maps the shared memory worker `hello.rank()` offers, or declines it with a warning.
  void MapSharedMemory(const wire::Hello& hello, Connection* conn) {
    conn->plan = shard_.plan();
    absl::StatusOr<std::unique_ptr<SharedRegion>> region =
        SharedRegion::Open(hello.shared_memory_name(), hello.shared_memory_nonce(),
                           conn->plan ? conn->plan->total_params() : 0);
    if (!region.ok()) {
      std::cerr << "server " << options_.shard.server_index << ": worker " << hello.rank()
                << "'s shared memory declined (" << region.status().message()
                << "); its values go over the stream" << std::endl;
      return;
    }
    conn->shared = std::move(*region);
    conn->shared_values = SharedValues{
        .params = conn->shared->params(), .grads = conn->shared->grads(), .plan = &*conn->plan};
  }

  // Compares in time independent of where the tokens differ.
  bool TokenMatches(const std::string& given) const {
    const std::string& want = options_.token;
    if (want.empty()) return true;
    unsigned char diff = given.size() != want.size();
    for (size_t i = 0; i < want.size(); ++i) {
      diff |= static_cast<unsigned char>(want[i]) ^
              static_cast<unsigned char>(i < given.size() ? given[i] : 0);
    }
    return diff == 0;
  }

  bool tracing() const { return options_.trace != nullptr && options_.trace->enabled(); }

  // One event per message handled; "update" when it completed a slice's aggregation.
  void Trace(int track, const wire::WorkerMessage& msg, const std::vector<Outgoing>& out,
             absl::Time start) {
    const bool updated = std::any_of(out.begin(), out.end(), [](const Outgoing& o) {
      return o.kind == Outgoing::Kind::kParams;
    });
    uint32_t slice = 0;
    // A gradient names its iteration, a pull the version it wants (docs/protocol.md).
    const char* counter = "iteration";
    uint64_t count = 0;
    const char* what = "message";
    if (msg.has_gradient()) {
      slice = msg.gradient().slice_id();
      count = msg.gradient().iteration();
      what = updated ? "aggregate+update" : "aggregate";
    } else if (msg.has_init()) {
      slice = msg.init().slice_id();
      what = "init";
    } else if (msg.has_pull()) {
      slice = msg.pull().slice_id();
      counter = "version";
      count = msg.pull().version();
      what = "pull";
    }
    options_.trace->Complete(track, absl::StrCat(what, " ", slice),
                             updated ? "update" : "aggregate", start, absl::Now(),
                             absl::StrCat("\"slice\": ", slice, ", \"", counter, "\": ", count));
  }

  void WriteLoop(Connection* conn, TrainStream* stream) {
    wire::ServerMessage msg;
    while (std::optional<PrioritySendQueue<Pending>::Item> item = conn->queue.Pop()) {
      const absl::Time start = absl::Now();
      msg.Clear();
      const Pending& p = item->value;
      switch (p.kind) {
        case Pending::Kind::kWelcome: {
          wire::Welcome* w = msg.mutable_welcome();
          w->set_server_index(options_.shard.server_index);
          w->set_start_version(shard_.start_version());
          w->set_shared_memory(conn->shared != nullptr);
          break;
        }
        case Pending::Kind::kAbort:
          msg.mutable_abort()->set_code(static_cast<int>(p.abort.code()));
          msg.mutable_abort()->set_message(std::string(p.abort.message()));
          break;
        case Pending::Kind::kOutgoing:
          if (p.out.kind == Outgoing::Kind::kAck) {
            msg.mutable_ack()->set_slice_id(p.out.slice_id);
            msg.mutable_ack()->set_iteration(p.out.iteration);
          } else {
            msg.mutable_params()->set_slice_id(p.out.slice_id);
            msg.mutable_params()->set_iteration(p.out.iteration);
          }
          break;
      }
      bool ok;
      if (p.kind == Pending::Kind::kOutgoing && p.out.kind == Outgoing::Kind::kParams &&
          conn->shared != nullptr) {
        // Straight into the worker's parameters; only the descriptor goes on the stream.
        // The worker reads this slice again only after it has the message (version order).
        std::memcpy(conn->shared->params() + conn->plan->slices()[p.out.slice_id].offset,
                    p.out.values->data(), p.out.values->size() * sizeof(float));
        msg.mutable_params()->set_shared_count(p.out.values->size());
        ok = stream->Write(msg);
      } else if (p.kind == Pending::Kind::kOutgoing && p.out.kind == Outgoing::Kind::kParams) {
        // A large slice goes as consecutive parts, back to back.
        wire::SliceData* d = msg.mutable_params();
        const float* values = p.out.values->data();
        ok = WriteInParts(static_cast<int64_t>(p.out.values->size()), options_.max_message_params,
                          [&](int64_t offset, int64_t count) {
                            d->set_offset(static_cast<uint64_t>(offset));
                            d->set_values(reinterpret_cast<const char*>(values + offset),
                                          count * sizeof(float));
                            return stream->Write(msg);
                          });
      } else {
        ok = stream->Write(msg);
      }
      conn->queue.Release(item->bytes);
      if (tracing() && p.kind == Pending::Kind::kOutgoing) {
        options_.trace->Complete(
            conn->send_track,
            absl::StrCat(p.out.kind == Outgoing::Kind::kAck ? "ack " : "params ", p.out.slice_id),
            "send", start, absl::Now(),
            absl::StrCat(
                "\"slice\": ", p.out.slice_id,
                p.out.kind == Outgoing::Kind::kAck ? ", \"iteration\": " : ", \"version\": ",
                p.out.iteration, ", \"bytes\": ", item->bytes));
      }
      if (p.kind == Pending::Kind::kAbort) conn->context->TryCancel();
      if (!ok) break;
    }
  }

  // Routes the shard's answers to the workers' queues.
  void Dispatch(const std::vector<Outgoing>& out) {
    if (out.empty()) return;
    absl::MutexLock lock(&mu_);
    for (const Outgoing& o : out) {
      auto it = streams_.find(o.rank);
      if (it == streams_.end()) continue;  // that worker's stream has ended
      const int64_t bytes = o.values ? static_cast<int64_t>(o.values->size() * sizeof(float)) : 0;
      it->second->queue.Push(Pending{.kind = Pending::Kind::kOutgoing, .out = o}, o.priority,
                             o.slice_id, bytes);
    }
  }

  // Worker `rank` broke the run: every other stream is told why and ended.
  void Fail(int rank, const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return;
    failure_ = absl::Status(status.code(), absl::StrCat("worker ", rank, ": ", status.message()));
    for (auto& [other, conn] : streams_) {
      if (other == rank) continue;
      conn->queue.Push(Pending{.kind = Pending::Kind::kAbort, .abort = failure_},
                       std::numeric_limits<int64_t>::min(), 0, 0);
    }
  }

  const ServerOptions options_;
  // Runs options_.shard.on_checkpoint; null without one. Declared before shard_, which
  // hands it the checkpoints.
  std::unique_ptr<CheckpointWriter> checkpoint_writer_;
  ParameterShard shard_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  absl::Mutex mu_;
  std::map<int, Connection*> streams_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool all_done_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Start(
    const ServerOptions& options) {
  P3_RETURN_IF_ERROR(ValidateOptimizerOptions(options.shard.optimizer));
  if (options.shard.num_workers < 1) {
    return absl::InvalidArgumentError("cluster.workers: must be >= 1");
  }
  auto impl = std::make_unique<Impl>(options);
  P3_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<ParameterServer>(new ParameterServer(std::move(impl)));
}

ParameterServer::ParameterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ParameterServer::~ParameterServer() { Shutdown(); }
int ParameterServer::port() const { return impl_->port(); }
absl::Status ParameterServer::Wait() { return impl_->Wait(); }
const ParameterShard& ParameterServer::shard() const { return impl_->shard(); }
void ParameterServer::Shutdown() { impl_->Shutdown(); }

}  // namespace p3
