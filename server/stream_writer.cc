// What goes down a worker's stream (ParameterServer::Impl, see parameter_server_impl.h):
// the shard's answers and the control messages, queued in the stream's lane of the send
// queue and written by the stream's writer thread; the stall reports and forwarded
// re-plans that go to every stream.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/base/log_line.h"
#include "p3/base/tcp_nudge.h"
#include "p3/core/slice_plan.h"
#include "p3/core/snapshot.h"
#include "p3/core/stall_report.h"
#include "p3/core/wire_dtype.h"
#include "server/parameter_server_impl.h"

namespace p3 {

void ParameterServer::Impl::Dispatch(const std::vector<ToWorker>& out) {
  if (out.empty()) return;
  absl::MutexLock lock(&mu_);
  for (const ToWorker& m : out) {
    auto it = streams_.find(m.rank);
    if (it == streams_.end()) continue;  // that worker's stream has ended
    it->second->Push(m.message, m.priority, m.message.slice_id, m.bytes);
  }
}

void ParameterServer::Impl::WriteLoop(Connection* conn, TrainStream* stream) {
  wire::ServerMessage msg;  // control messages only
  while (std::optional<SendQueue<Downstream>::Item> item = conn->queue->Pop(conn->lane)) {
    const absl::Time start = absl::Now();
    const Downstream& d = item->value;
    if (conn->batches_down && d.kind == Downstream::Kind::kParams) {
      if (!WriteSharedParamsBatch(conn, *std::move(item), stream, start)) break;
      continue;
    }
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
          w->set_takes_shared_batches(conn->shared != nullptr);  // ServeSharedGradients
          w->set_rejoined(conn->rejoined);
          w->set_current_version(conn->current_version);
          w->set_plan_slice_params(conn->plan.slice_params);
          w->set_plan_from_iteration(conn->plan.from_iteration);
          w->set_wants_reached(shard_.wants_reached());
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
        case Downstream::Kind::kMembership:
          msg.mutable_membership()->set_from_iteration(d.from_iteration);
          for (int r : *d.present) msg.mutable_membership()->add_present(static_cast<uint32_t>(r));
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

SliceHeader ParameterServer::Impl::ParamsHeader(const Downstream& d) {
  SliceHeader header;
  header.slice_id = static_cast<uint32_t>(d.slice_id);
  header.set_version(d.version);
  if (const std::optional<int> e = d.values->scale_exponent()) {
    header.has_scale_exponent = true;
    header.scale_exponent = *e;
  }
  return header;
}

bool ParameterServer::Impl::WriteParams(const Connection& conn, const Downstream& d,
                                        TrainStream* stream) {
  const Snapshot& snapshot = *d.values;
  SliceHeader header = ParamsHeader(d);
  if (conn.shared != nullptr) return WriteSharedParams(conn, d, header, stream);
  const int64_t n = snapshot.size();
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

void ParameterServer::Impl::TraceSend(int track, const Downstream& d, int64_t bytes,
                                      absl::Time start) {
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

void ParameterServer::Impl::WatchStalls() {
  GradientStallWatch watch(options_.shard.server_index, options_.stall_report);
  const absl::Duration poll = std::max(absl::Milliseconds(20), options_.stall_report / 4);
  while (!stop_watching_.WaitForNotificationWithTimeout(poll)) {
    std::optional<StallReport> report = watch.Observe(shard_.Waits(), absl::Now());
    if (!report) continue;
    LogLine(report->text);
    // A link back from a fault whose TCP connection stays stuck (p3/base/tcp_nudge.h):
    // this server's own connections, by its listening port.
    const std::string nudged = DescribeNudges(NudgeStuckTcpConnections({.local_ports = {port_}}));
    if (!nudged.empty()) {
      LogLine(absl::StrCat("[stall] server ", options_.shard.server_index, ": ", nudged));
    }
    auto shared = std::make_shared<const StallReport>(*std::move(report));
    absl::MutexLock lock(&mu_);
    last_stall_ = shared;
    last_stall_at_ = absl::Now();
    for (auto& [rank, conn] : streams_) {
      if (std::binary_search(shared->missing_ranks.begin(), shared->missing_ranks.end(), rank)) {
        continue;
      }
      conn->Push(Downstream{.kind = Downstream::Kind::kStall, .stall = shared},
                 SendQueue<Downstream>::kUrgent, 0, 0);
    }
  }
}

void ParameterServer::Impl::ForwardReplan(uint64_t from_iteration, int64_t slice_params) {
  std::cerr << "server " << options_.shard.server_index << ": re-plan to slices of " << slice_params
            << " from iteration " << from_iteration << std::endl;
  absl::MutexLock lock(&mu_);
  for (auto& [rank, conn] : streams_) {
    conn->Push(Downstream{.kind = Downstream::Kind::kReplan,
                          .from_iteration = from_iteration,
                          .slice_params = slice_params},
               SendQueue<Downstream>::kUrgent, 0, 0);
  }
}

Downstream ParameterServer::Impl::MembershipMessage(const MembershipChange& change) {
  return Downstream{.kind = Downstream::Kind::kMembership,
                    .from_iteration = change.from_iteration,
                    .present = std::make_shared<const std::vector<int>>(change.present)};
}

void ParameterServer::Impl::ForwardMembership(const MembershipChange& change) {
  std::cerr << "server " << options_.shard.server_index << ": workers {"
            << DescribeRanks(change.present) << "} from iteration " << change.from_iteration
            << std::endl;
  const Downstream message = MembershipMessage(change);
  absl::MutexLock lock(&mu_);
  for (auto& [rank, conn] : streams_) conn->Push(message, SendQueue<Downstream>::kUrgent, 0, 0);
}

}  // namespace p3
