// A worker's stream on gRPC's handler thread (ParameterServer::Impl, see
// parameter_server_impl.h): the handshake, then every message read and handed to the
// shard.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "p3/base/status_macros.h"
#include "p3/base/thread_name.h"
#include "server/message_handler.h"
#include "server/parameter_server_impl.h"

namespace p3 {

absl::Status ParameterServer::Impl::Serve(grpc::ServerContext* context, TrainStream* stream) {
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
    // Refused: only this stream ends, unless the restored checkpoint does not fit the
    // model: every later Hello would be refused alike, and the server would wait for
    // workers forever (a launcher stops it; a lone p3_server or a Kubernetes pod did not
    // stop), so the run fails, naming the refusal.
    absl::StatusOr<HelloResult> hello_result =
        HandleHello(&shard_, hello, options_.shard.server_index);
    if (!hello_result.ok()) {
      if (absl::Status refusal = shard_.restore_refusal(); !refusal.ok()) {
        FailLocked(static_cast<int>(hello.rank()), refusal);
      }
      return hello_result.status();
    }
    HelloResult joined = *std::move(hello_result);
    rank = joined.rank;
    initial = std::move(joined.out);
    conn = std::make_unique<Connection>();
    conn->rank = rank;
    conn->context = context;
    conn->rejoined = joined.rejoined;
    conn->current_version = joined.current_version;
    conn->plan = joined.plan;
    if (joined.rejoined) {
      std::cerr << "server " << options_.shard.server_index << ": worker " << rank
                << " rejoined; its slices here are at version " << joined.current_version
                << " or the next" << std::endl;
      if (absent_.erase(rank) > 0) ++absent_generation_;
    }
    if (!hello.shared_memory_name().empty() && options_.shared_memory) {
      MapSharedMemory(hello, conn.get());
      conn->batches_down = conn->shared != nullptr && hello.takes_shared_batches();
    }
    const SendQueueOptions order{.priority = joined.signature.priority,
                                 .credit_bytes = options_.credit_bytes,
                                 .stalled_after = options_.stalled_write};
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
    // Elastic runs: a worker that says Hello mid-run (a joining one) learns every change
    // so far; the ones after come from ForwardMembership (both under mu_).
    const std::vector<MembershipChange> membership = shard_.Membership();
    for (size_t i = 1; i < membership.size(); ++i) {
      conn->Push(MembershipMessage(membership[i]), SendQueue<Downstream>::kUrgent, 0, 0);
    }
    streams_[rank] = conn.get();
  }
  Connection& connection = *conn;
  Dispatch(initial);
  if (tracing()) {
    connection.receive_track = options_.trace->Track(absl::StrCat("from worker ", rank));
    connection.send_track = options_.trace->Track(absl::StrCat("to worker ", rank));
  }
  // Named for profiles and wake-up counts (docs/results/streaming/streaming.md); gRPC's
  // handler thread gets its own name back when the stream ends (it serves others later).
  std::thread writer([this, &connection, stream, rank] {
    NameThisThread(absl::StrCat("p3-send-w", rank));
    WriteLoop(&connection, stream);
  });
  const std::string handler_name = ThisThreadName();
  NameThisThread(absl::StrCat("p3-recv-w", rank));

  bool awaiting_rejoin = false;
  absl::Status status = ReadLoop(rank, connection, stream, &awaiting_rejoin);
  if (!status.ok() && !awaiting_rejoin) Fail(rank, status);
  connection.queue->Close(connection.lane);
  writer.join();
  NameThisThread(handler_name);
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

absl::Status ParameterServer::Impl::EndOldStreamLocked(int rank) {
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

absl::Status ParameterServer::Impl::ReadLoop(int rank, const Connection& conn, TrainStream* stream,
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
      return absl::InvalidArgumentError(absl::StrCat("a malformed message: ", decoded.message()));
    }
    if (!msg.is_slice && msg.control.has_shared_gradients()) {
      P3_RETURN_IF_ERROR(
          ServeSharedGradients(rank, conn, msg.control.shared_gradients(), &handled));
      continue;
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
    if (handled.membership.has_value()) {
      ForwardMembership(*handled.membership);
      continue;
    }
    if (tracing()) Trace(track, msg, handled.out, start);
    Dispatch(handled.out);
    // The queues hold their own references: dropping ours now lets the shard reuse a
    // snapshot's buffer as soon as the messages are written.
    handled.out.clear();
  }
  // Read before mu_: what this server still waits for, to name a stall that came first.
  const std::vector<SliceWait> waits = shard_.Waits();
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
              << absl::FormatDuration(options_.rejoin_timeout) << " for it to rejoin" << std::endl;
    return absl::UnavailableError(
        absl::StrCat("worker ", rank, " disconnected; waiting for it to rejoin"));
  }
  return absl::UnavailableError(
      absl::StrCat("worker ", rank, " disconnected before it was done", StalledBefore(rank, waits)));
}

absl::Status ParameterServer::Impl::ServeSharedGradients(int rank, const Connection& conn,
                                                         const wire::SharedSlices& batch,
                                                         Handled* handled) {
  const SharedValues* shared = conn.shared != nullptr ? &conn.shared_values : nullptr;
  P3_RETURN_IF_ERROR(CheckSharedGradients(batch, shared));
  for (const wire::SliceData& slice : batch.slices()) {
    const absl::Time start = absl::Now();
    handled->out.clear();
    P3_RETURN_IF_ERROR(HandleSharedGradient(&shard_, rank, slice, handled, shared));
    if (tracing()) {
      const bool updated = !handled->out.empty();
      options_.trace->Complete(
          conn.receive_track,
          absl::StrCat(updated ? "aggregate+update " : "aggregate ", slice.slice_id()),
          updated ? "update" : "aggregate", start, absl::Now(),
          absl::StrCat("\"slice\": ", slice.slice_id(), ", \"iteration\": ", slice.iteration()));
    }
    Dispatch(handled->out);
    handled->out.clear();
  }
  return absl::OkStatus();
}

std::string ParameterServer::Impl::StalledBefore(int rank,
                                                 const std::vector<SliceWait>& waits) const {
  if (last_stall_ == nullptr) return "";
  const StallReport& stall = *last_stall_;
  if (std::binary_search(stall.missing_ranks.begin(), stall.missing_ranks.end(), rank)) return "";
  // Still the wait the report was about: its iteration is the oldest still awaited.
  bool current = false;
  for (const SliceWait& wait : waits) current |= wait.iteration == stall.iteration;
  if (!current) return "";
  return absl::StrCat(", after this server had waited ",
                      absl::FormatDuration(absl::Trunc(
                          stall.waited + (absl::Now() - last_stall_at_), absl::Milliseconds(100))),
                      " for the gradients of iteration ", stall.iteration, " from worker",
                      stall.missing_ranks.size() == 1 ? " " : "s ",
                      absl::StrJoin(stall.missing_ranks, ", "), " (the stall came first)");
}

bool ParameterServer::Impl::TokenMatches(const std::string& given) const {
  const std::string& want = options_.token;
  if (want.empty()) return true;
  unsigned char diff = given.size() != want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    diff |= static_cast<unsigned char>(want[i]) ^
            static_cast<unsigned char>(i < given.size() ? given[i] : 0);
  }
  return diff == 0;
}

void ParameterServer::Impl::Trace(int track, const DecodedWorkerMessage& msg,
                                  const std::vector<ToWorker>& out, absl::Time start) {
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
  options_.trace->Complete(track, absl::StrCat(what, " ", slice), updated ? "update" : "aggregate",
                           start, absl::Now(),
                           absl::StrCat("\"slice\": ", slice, ", \"", counter, "\": ", count));
}

}  // namespace p3
