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
#include "absl/synchronization/notification.h"
#include "p3/core/send_queue.h"
#include "p3/core/shared_memory.h"
#include "p3/core/slice_plan.h"
#include "p3/core/stall_report.h"
#include "p3/base/status_macros.h"
#include "p3/core/wire_dtype.h"
#include "proto/raw_train.h"
#include "proto/wire.h"
#include "proto/wire_codec.h"
#include "server/message_handler.h"

namespace p3 {
namespace {

// Raw streams (proto/raw_train.h): messages are encoded and decoded by proto/wire_codec.h,
// so that slice values never pass through a protobuf string.
using TrainStream = RawTrainServerStream;

// The shard hands its checkpoints to the server's writer thread instead of running
// `on_checkpoint` on the stream handler that completed the iteration.
ShardOptions WithCheckpointWriter(ShardOptions shard, CheckpointWriter* writer) {
  if (writer != nullptr) {
    shard.on_checkpoint = [writer](ShardCheckpoint c) { writer->Submit(std::move(c)); };
  }
  return shard;
}

}  // namespace

class ParameterServer::Impl {
 public:
  explicit Impl(const ServerOptions& options)
      : options_(options),
        service_([this](grpc::ServerContext* context, TrainStream* stream) {
          return ToGrpcStatus(Serve(context, stream));
        }),
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
    builder.RegisterService(&service_);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    // The same keepalive settings as the workers' channels (proto/wire.h).
    for (const auto& [name, value] : KeepaliveChannelArgs(options_.peer_timeout)) {
      builder.AddChannelArgument(name, value);
    }
    // gRPC sets SO_REUSEPORT by default: a second server on a port in use would listen
    // too, and connections would land on either. A port is one server's, or start fails.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.address,
                                                 " (in use by another process?)"));
    }
    if (options_.stall_report > absl::ZeroDuration()) {
      stall_watcher_ = std::thread([this] { WatchStalls(); });
    }
    return absl::OkStatus();
  }

  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    while (!all_done_ && failure_.ok()) {
      // Wakes up when the run ends, when a worker leaves or rejoins, or at the deadline of
      // the worker that has been gone longest.
      wait_generation_ = absent_generation_;
      const absl::Condition changed(
          +[](Impl* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->all_done_ || !self->failure_.ok() ||
                   self->absent_generation_ != self->wait_generation_;
          },
          this);
      if (absent_.empty()) {
        mu_.Await(changed);
        continue;
      }
      auto first =
          std::min_element(absent_.begin(), absent_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      const int rank = first->first;
      if (!mu_.AwaitWithDeadline(changed, first->second)) {
        absent_.erase(rank);
        FailLocked(rank, absl::DeadlineExceededError(
                             absl::StrCat("died and did not rejoin within ",
                                          absl::FormatDuration(options_.rejoin_timeout),
                                          " (cluster.rejoin_timeout_s)")));
      }
    }
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
          conn->queue->Close(conn->lane);
          conn->context->TryCancel();
        }
      }
    }
    // Waits for the handlers still running, and cancels them after the grace period.
    if (server_ != nullptr)
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    // No handler cuts a checkpoint any more: the queued ones are written before this returns.
    if (checkpoint_writer_ != nullptr) checkpoint_writer_->Shutdown();
    stop_watching_.Notify();
    if (stall_watcher_.joinable()) stall_watcher_.join();
  }

  int port() const { return port_; }
  const ParameterShard& shard() const { return shard_; }
  size_t network_lane_slots() {
    absl::MutexLock lock(&mu_);
    return link_ == nullptr ? 0 : link_->lane_slots();
  }

 private:
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

    bool Push(Downstream message, int64_t priority, int64_t tiebreak, int64_t bytes) {
      return queue->Push(lane, std::move(message), priority, tiebreak, bytes);
    }
  };

  absl::Status Serve(grpc::ServerContext* context, TrainStream* stream) {
    grpc::ByteBuffer buffer;
    if (!stream->Read(&buffer)) return absl::CancelledError("stream closed before the Hello");
    DecodedWorkerMessage first;
    if (absl::Status decoded = Decode(&buffer, &first); !decoded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the first message is malformed: ", decoded.message()));
    }
    if (first.field != wire::WorkerMessage::kHelloFieldNumber) {
      return absl::InvalidArgumentError("the first message must be a Hello");
    }
    const wire::Hello& hello = first.control.hello();
    if (!TokenMatches(hello.token())) {
      return absl::UnauthenticatedError(
          absl::StrCat("worker ", hello.rank(), " refused: missing or wrong cluster token"));
    }
    // Join and registration happen under mu_, so that the initial values another thread
    // dispatches for this worker find its queue.
    std::unique_ptr<Connection> conn;
    std::vector<ToWorker> initial;
    int rank = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return failure_;
      if (hello.rejoin() && !shard_.TakesRejoinAsJoin()) {
        // Refused here, the Hello cannot end a live stream of that rank.
        P3_RETURN_IF_ERROR(CheckRejoinHello(shard_, hello, options_.shard.server_index));
        P3_RETURN_IF_ERROR(EndOldStreamLocked(static_cast<int>(hello.rank())));
      }
      // Refused: only this stream ends.
      P3_ASSIGN_OR_RETURN(HelloResult joined,
                          HandleHello(&shard_, hello, options_.shard.server_index));
      rank = joined.rank;
      initial = std::move(joined.out);
      conn = std::make_unique<Connection>();
      conn->rank = rank;
      conn->context = context;
      conn->rejoined = joined.rejoined;
      conn->current_version = joined.current_version;
      if (joined.rejoined) {
        std::cerr << "server " << options_.shard.server_index << ": worker " << rank
                  << " rejoined; its slices here are at version " << joined.current_version
                  << " or the next" << std::endl;
        if (absent_.erase(rank) > 0) ++absent_generation_;
      }
      if (!hello.shared_memory_name().empty() && options_.shared_memory) {
        MapSharedMemory(hello, conn.get());
      }
      const SendQueueOptions order{.priority = joined.signature.priority,
                                   .credit_bytes = options_.credit_bytes};
      if (conn->shared != nullptr) {
        conn->own_queue = std::make_unique<SendQueue<Downstream>>(order);
        conn->queue = conn->own_queue.get();
      } else {
        // Every stream over the network shares one send order (the signature, and so the
        // order, is the same for every worker).
        if (link_ == nullptr) link_ = std::make_unique<SendQueue<Downstream>>(order);
        conn->queue = link_.get();
      }
      conn->lane = conn->queue->AddLane();
      // The Welcome goes first, also in FIFO order: queued before anyone can see the queue.
      conn->Push(Downstream{.kind = Downstream::Kind::kWelcome}, SendQueue<Downstream>::kUrgent, 0,
                 0);
      // A worker that joins while a re-plan is pending (rank 0 may be an iteration ahead)
      // learns of it here; one that was here already gets it from ForwardReplan (both
      // under mu_, so a worker may hear of it twice, never not at all).
      if (std::optional<std::pair<uint64_t, int64_t>> replan = shard_.ReplanPending()) {
        conn->Push(Downstream{.kind = Downstream::Kind::kReplan,
                              .from_iteration = replan->first,
                              .slice_params = replan->second},
                   SendQueue<Downstream>::kUrgent, 0, 0);
      }
      streams_[rank] = conn.get();
    }
    Connection& connection = *conn;
    Dispatch(initial);
    if (tracing()) {
      connection.receive_track = options_.trace->Track(absl::StrCat("from worker ", rank));
      connection.send_track = options_.trace->Track(absl::StrCat("to worker ", rank));
    }
    std::thread writer([this, &connection, stream] { WriteLoop(&connection, stream); });

    bool awaiting_rejoin = false;
    absl::Status status = ReadLoop(rank, connection, stream, &awaiting_rejoin);
    if (!status.ok() && !awaiting_rejoin) Fail(rank, status);
    connection.queue->Close(connection.lane);
    writer.join();
    {
      absl::MutexLock lock(&mu_);
      auto it = streams_.find(rank);
      if (it != streams_.end() && it->second == &connection) streams_.erase(it);
    }
    // Nothing can push to the lane any more (pushes find a stream in streams_, under
    // mu_): its storage goes with the stream, and a rejoining worker gets a lane anew.
    connection.queue->ReleaseLane(connection.lane);
    return status;
  }

  // A rejoining worker's old stream may not have noticed yet that its process is gone:
  // it is cancelled, and the rejoin waits (at most peer_timeout) until its handler has
  // returned, so that none of the old process's messages is handled after the rejoin.
  absl::Status EndOldStreamLocked(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = streams_.find(rank);
    if (it == streams_.end()) return absl::OkStatus();
    it->second->context->TryCancel();
    struct Gone {
      std::map<int, Connection*>* streams;
      int rank;
    } gone{&streams_, rank};
    const bool ended =
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](Gone* g) { return g->streams->count(g->rank) == 0; }, &gone),
                             options_.peer_timeout);
    if (!ended) {
      return absl::UnavailableError(
          absl::StrCat("worker ", rank, " asks to rejoin, but its old stream did not end within ",
                       absl::FormatDuration(options_.peer_timeout)));
    }
    return absl::OkStatus();
  }

  // Reads until the worker's Done (OK) or an error.
  // A stream that breaks sets `awaiting_rejoin` when the worker may rejoin (rejoins on,
  // initial values in): the run goes on without it for up to rejoin_timeout (Wait()).
  absl::Status ReadLoop(int rank, const Connection& conn, TrainStream* stream,
                        bool* awaiting_rejoin) {
    const int track = conn.receive_track;
    const SharedValues* shared = conn.shared != nullptr ? &conn.shared_values : nullptr;
    // All reused from message to message: no allocation per gradient.
    grpc::ByteBuffer buffer;
    DecodedWorkerMessage msg;
    Handled handled;
    while (stream->Read(&buffer)) {
      const absl::Time start = absl::Now();
      if (absl::Status decoded = Decode(&buffer, &msg); !decoded.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("a malformed message: ", decoded.message()));
      }
      P3_RETURN_IF_ERROR(HandleWorkerMessage(&shard_, rank, msg, &handled, shared));
      if (handled.done) {
        if (handled.all_done) {
          absl::MutexLock lock(&mu_);
          all_done_ = true;
        }
        return absl::OkStatus();
      }
      if (handled.replan) {
        ForwardReplan(handled.replan_from_iteration, handled.replan_slice_params);
        continue;
      }
      if (tracing()) Trace(track, msg, handled.out, start);
      Dispatch(handled.out);
      // The queues hold their own references: dropping ours now lets the shard reuse a
      // snapshot's buffer as soon as the messages are written.
      handled.out.clear();
    }
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    if (options_.rejoin_timeout > absl::ZeroDuration() && !shut_down_) {
      if (!shard_.initialized()) {
        return absl::UnavailableError(absl::StrCat(
            "worker ", rank, " disconnected during the handshake, before the initial values ",
            "were in; a worker can rejoin only after them"));
      }
      if (!shard_.everyone_joined()) {
        // A new process's run has not started: a Hello with rejoin would be taken as an
        // ordinary join, which this rank has used. Failing lets the whole cluster restart.
        return absl::UnavailableError(absl::StrCat(
            "worker ", rank, " disconnected before every worker had joined this server; a ",
            "worker can rejoin only a run that has started"));
      }
      *awaiting_rejoin = true;
      absent_[rank] = absl::Now() + options_.rejoin_timeout;
      ++absent_generation_;
      std::cerr << "server " << options_.shard.server_index << ": worker " << rank
                << " disconnected before it was done; waiting up to "
                << absl::FormatDuration(options_.rejoin_timeout) << " for it to rejoin"
                << std::endl;
      return absl::UnavailableError(
          absl::StrCat("worker ", rank, " disconnected; waiting for it to rejoin"));
    }
    return absl::UnavailableError(
        absl::StrCat("worker ", rank, " disconnected before it was done"));
  }

  // Maps the shared memory worker `hello.rank()` offers, or declines it with a warning.
  void MapSharedMemory(const wire::Hello& hello, Connection* conn) {
    const std::optional<SlicePlan> plan = shard_.plan();
    absl::StatusOr<std::unique_ptr<SharedRegion>> region =
        SharedRegion::Open(hello.shared_memory_name(), hello.shared_memory_nonce(),
                           plan ? plan->total_params() : 0);
    if (!region.ok()) {
      std::cerr << "server " << options_.shard.server_index << ": worker " << hello.rank()
                << "'s shared memory declined (" << region.status().message()
                << "); its values go over the stream" << std::endl;
      return;
    }
    conn->shared = std::move(*region);
    conn->shared_values =
        SharedValues{.params = conn->shared->params(), .grads = conn->shared->grads()};
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
  void Trace(int track, const DecodedWorkerMessage& msg, const std::vector<ToWorker>& out,
             absl::Time start) {
    const bool updated = std::any_of(out.begin(), out.end(), [](const ToWorker& m) {
      return m.message.kind == Downstream::Kind::kParams;
    });
    uint32_t slice = 0;
    // A gradient names its iteration, a pull the version it wants (docs/protocol.md).
    const char* counter = "iteration";
    uint64_t count = 0;
    const char* what = "message";
    if (msg.is_slice && msg.field == wire::WorkerMessage::kGradientFieldNumber) {
      slice = msg.header.slice_id;
      count = msg.header.iteration();
      what = updated ? "aggregate+update" : "aggregate";
    } else if (msg.is_slice) {
      slice = msg.header.slice_id;
      what = "init";
    } else if (msg.control.has_pull()) {
      slice = msg.control.pull().slice_id();
      counter = "version";
      count = msg.control.pull().version();
      what = "pull";
    }
    options_.trace->Complete(track, absl::StrCat(what, " ", slice),
                             updated ? "update" : "aggregate", start, absl::Now(),
                             absl::StrCat("\"slice\": ", slice, ", \"", counter, "\": ", count));
  }

  // One event per message of the shard written (kParams, kAck, kBuffers), with what it
  // counts under its own name.
  void TraceSend(int track, const Downstream& d, int64_t bytes, absl::Time start) {
    const char* what = "params ";
    const char* counter = "version";
    uint64_t count = d.version;
    switch (d.kind) {
      case Downstream::Kind::kParams:
        break;
      case Downstream::Kind::kAck:
        what = "ack ";
        counter = "iteration";
        count = d.iteration;
        break;
      case Downstream::Kind::kBuffers:
        what = "buffers ";
        counter = "round";
        count = d.round;
        break;
      default:
        return;  // the edge's control messages
    }
    options_.trace->Complete(track, absl::StrCat(what, d.slice_id), "send", start, absl::Now(),
                             absl::StrCat("\"slice\": ", d.slice_id, ", \"", counter, "\": ", count,
                                          ", \"bytes\": ", bytes));
  }

  void WriteLoop(Connection* conn, TrainStream* stream) {
    wire::ServerMessage msg;  // control messages only
    while (std::optional<SendQueue<Downstream>::Item> item = conn->queue->Pop(conn->lane)) {
      const absl::Time start = absl::Now();
      const Downstream& d = item->value;
      bool ok = true;
      if (d.kind == Downstream::Kind::kParams) {
        ok = WriteParams(*conn, d, stream);
      } else {
        msg.Clear();
        switch (d.kind) {
          case Downstream::Kind::kParams:  // written above
            break;
          case Downstream::Kind::kWelcome: {
            wire::Welcome* w = msg.mutable_welcome();
            w->set_server_index(options_.shard.server_index);
            w->set_start_version(shard_.start_version());
            w->set_shared_memory(conn->shared != nullptr);
            w->set_rejoined(conn->rejoined);
            w->set_current_version(conn->current_version);
            break;
          }
          case Downstream::Kind::kStall: {
            wire::Stall* stall = msg.mutable_stall();
            stall->set_iteration(d.stall->iteration);
            for (int r : d.stall->missing_ranks) stall->add_missing_ranks(static_cast<uint32_t>(r));
            stall->set_waited_s(absl::ToDoubleSeconds(d.stall->waited));
            break;
          }
          case Downstream::Kind::kReplan:
            msg.mutable_replan()->set_from_iteration(d.from_iteration);
            msg.mutable_replan()->set_slice_params(d.slice_params);
            break;
          case Downstream::Kind::kAbort:
            msg.mutable_abort()->set_code(static_cast<int>(d.abort.code()));
            msg.mutable_abort()->set_message(std::string(d.abort.message()));
            break;
          case Downstream::Kind::kBuffers:
            msg.mutable_buffers()->set_round(d.round);
            msg.mutable_buffers()->set_values(d.buffers->data(), d.buffers->size() * sizeof(float));
            break;
          case Downstream::Kind::kAck:
            msg.mutable_ack()->set_slice_id(d.slice_id);
            msg.mutable_ack()->set_iteration(d.iteration);
            break;
        }
        ok = stream->Write(EncodeMessage(msg));
      }
      conn->queue->Release(conn->lane, item->bytes);
      if (tracing()) TraceSend(conn->send_track, d, item->bytes, start);
      if (d.kind == Downstream::Kind::kAbort) conn->context->TryCancel();
      if (!ok) break;
    }
    // Nothing more goes out on this lane: its queued messages must not hold up the others.
    conn->queue->Close(conn->lane);
  }

  // Writes version `out.iteration` of a slice to the worker: into its shared memory with a
  // descriptor on the stream, or on the stream in parts of at most max_message_params,
  // back to back. The stream's buffers point into the shard's snapshot, which they keep
  // alive until gRPC has sent them (the shard then takes a fresh buffer for the next
  // version instead of overwriting this one).
  //
  // A 16-bit wire: the snapshot is the version encoded once for every worker; its bytes
  // go out as they are, and a colocated worker gets them decoded into its parameters, the
  // same float32 values it would decode from the stream.
  bool WriteParams(const Connection& conn, const Downstream& d, TrainStream* stream) {
    const Snapshot& snapshot = *d.values;
    SliceHeader header;
    header.slice_id = static_cast<uint32_t>(d.slice_id);
    header.set_version(d.version);
    if (const std::optional<int> e = snapshot.scale_exponent()) {
      header.has_scale_exponent = true;
      header.scale_exponent = *e;
    }
    const int64_t n = snapshot.size();
    if (conn.shared != nullptr) {
      // Straight into the worker's parameters; only the descriptor goes on the stream.
      // The worker reads this slice again only after it has the message (version order).
      // The offset of the plan the slice id belongs to (a re-plan may have followed).
      snapshot.DecodeTo(conn.shared->params() + d.offset);
      header.shared_count = static_cast<uint64_t>(n);
      return stream->Write(
          EncodeSlice(wire::ServerMessage::kParamsFieldNumber, header, nullptr, 0, nullptr));
    }
    const char* values = snapshot.bytes().data();
    const size_t width = BytesPerValue(snapshot.dtype());
    std::shared_ptr<const void> keepalive = d.values;
    // Write-through: the write completes once the bytes are in the kernel, so that the
    // link queue's credit counts what is really still waiting above the socket.
    const grpc::WriteOptions through = grpc::WriteOptions().set_write_through();
    return WriteInParts(n, options_.max_message_params, [&](int64_t offset, int64_t count) {
      header.offset = static_cast<uint64_t>(offset);
      return stream->Write(EncodeSlice(wire::ServerMessage::kParamsFieldNumber, header,
                                       values + offset * width, count * width, keepalive),
                           through);
    });
  }

  // Every stall_report / 4: logs the gradients awaited for stall_report or longer, and
  // tells the workers that are waiting for them whom they wait for.
  void WatchStalls() {
    GradientStallWatch watch(options_.shard.server_index, options_.stall_report);
    const absl::Duration poll = std::max(absl::Milliseconds(20), options_.stall_report / 4);
    while (!stop_watching_.WaitForNotificationWithTimeout(poll)) {
      std::optional<StallReport> report = watch.Observe(shard_.Waits(), absl::Now());
      if (!report) continue;
      std::cerr << report->text << std::endl;
      auto shared = std::make_shared<const StallReport>(*std::move(report));
      absl::MutexLock lock(&mu_);
      for (auto& [rank, conn] : streams_) {
        if (std::binary_search(shared->missing_ranks.begin(), shared->missing_ranks.end(), rank)) {
          continue;
        }
        conn->Push(Downstream{.kind = Downstream::Kind::kStall, .stall = shared},
                   SendQueue<Downstream>::kUrgent, 0, 0);
      }
    }
  }

  // Rank 0's re-plan, which the shard accepted, to every worker ahead of anything queued:
  // in particular ahead of this server's values of version `from_iteration`, which cannot
  // exist yet (they need rank 0's gradients that follow the Replan on its stream).
  void ForwardReplan(uint64_t from_iteration, int64_t slice_params) {
    std::cerr << "server " << options_.shard.server_index << ": re-plan to slices of "
              << slice_params << " from iteration " << from_iteration << std::endl;
    absl::MutexLock lock(&mu_);
    for (auto& [rank, conn] : streams_) {
      conn->Push(Downstream{.kind = Downstream::Kind::kReplan,
                            .from_iteration = from_iteration,
                            .slice_params = slice_params},
                 SendQueue<Downstream>::kUrgent, 0, 0);
    }
  }

  // Routes the shard's answers to the workers' queues.
  void Dispatch(const std::vector<ToWorker>& out) {
    if (out.empty()) return;
    absl::MutexLock lock(&mu_);
    for (const ToWorker& m : out) {
      auto it = streams_.find(m.rank);
      if (it == streams_.end()) continue;  // that worker's stream has ended
      it->second->Push(m.message, m.priority, m.message.slice_id, m.bytes);
    }
  }

  // Worker `rank` broke the run: every other stream is told why and ended.
  void Fail(int rank, const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    FailLocked(rank, status);
  }

  void FailLocked(int rank, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!failure_.ok()) return;
    failure_ = absl::Status(status.code(), absl::StrCat("worker ", rank, ": ", status.message()));
    for (auto& [other, conn] : streams_) {
      if (other == rank) continue;
      // Ahead of everything queued, in FIFO modes too.
      conn->Push(Downstream{.kind = Downstream::Kind::kAbort, .abort = failure_},
                 SendQueue<Downstream>::kUrgent, 0, 0);
    }
  }

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
  bool all_done_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Workers gone and awaited (rejoin_timeout > 0): rank -> when waiting ends. Every
  // change bumps absent_generation_, which Wait() watches.
  std::map<int, absl::Time> absent_ ABSL_GUARDED_BY(mu_);
  int64_t absent_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t wait_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Start(
    const ServerOptions& options) {
  P3_RETURN_IF_ERROR(ValidateOptimizerOptions(options.shard.optimizer));
  if (options.shard.num_workers < 1) {
    return absl::InvalidArgumentError("cluster.workers: must be >= 1");
  }
  if (options.rejoin_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("cluster.rejoin_timeout_s: must be >= 0");
  }
  ServerOptions resolved = options;
  resolved.shard.accept_rejoin = options.rejoin_timeout > absl::ZeroDuration();
  auto impl = std::make_unique<Impl>(resolved);
  P3_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<ParameterServer>(new ParameterServer(std::move(impl)));
}

ParameterServer::ParameterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ParameterServer::~ParameterServer() { Shutdown(); }
int ParameterServer::port() const { return impl_->port(); }
absl::Status ParameterServer::Wait() { return impl_->Wait(); }
const ParameterShard& ParameterServer::shard() const { return impl_->shard(); }
size_t ParameterServer::network_lane_slots() const { return impl_->network_lane_slots(); }
void ParameterServer::Shutdown() { impl_->Shutdown(); }

}  // namespace p3
