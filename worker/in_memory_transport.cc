#include "worker/in_memory_transport.h"

#include <atomic>
#include <limits>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "p3/core/slice_plan.h"
#include "p3/core/snapshot.h"
#include "p3/core/transport_core.h"
#include "p3/core/wire_dtype.h"
#include "worker/link_end.h"

namespace p3 {
namespace {

// Appends what the shard answered to `out`, or returns why it refused.
absl::Status AppendTo(absl::StatusOr<std::vector<ToWorker>> answer, std::vector<ToWorker>* out) {
  if (!answer.ok()) return answer.status();
  out->insert(out->end(), answer->begin(), answer->end());
  return absl::OkStatus();
}

}  // namespace

// ---- the server ----------------------------------------------------------------------

InMemoryServer::InMemoryServer(const ShardOptions& options) : shard_(options) {}

absl::Status InMemoryServer::Wait() {
  absl::MutexLock lock(&mu_);
  auto over = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return all_done_ || !failure_.ok(); };
  mu_.Await(absl::Condition(&over));
  return failure_;
}

void InMemoryServer::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  FailLocked(-1, status);
}

void InMemoryServer::FailLocked(int rank, const absl::Status& status) {
  if (!failure_.ok()) return;
  failure_ =
      rank < 0 ? status
               : absl::Status(status.code(), absl::StrCat("worker ", rank, ": ", status.message()));
  for (auto& [other, link] : links_) {
    if (link.ended) continue;
    // Ahead of everything queued; after either, nothing more is taken from the link.
    if (rank < 0 || other == rank) {
      Push(link, Delivery{.end = status}, SendQueue<Delivery>::kUrgent, 0, 0);
    } else {
      Push(link,
           Delivery{.message = Downstream{.kind = Downstream::Kind::kAbort, .abort = failure_}},
           SendQueue<Delivery>::kUrgent, 0, 0);
    }
    link.ended = true;
  }
}

void InMemoryServer::Push(LinkState& link, Delivery delivery, int64_t priority, int64_t tiebreak,
                          int64_t bytes) {
  send_queue_->Push(link.lane, std::move(delivery), priority, tiebreak, bytes);
}

absl::StatusOr<uint64_t> InMemoryServer::Link(const TransportOptions& options) {
  if (options.rejoin) {
    return absl::UnimplementedError("the in-memory transport cannot rejoin a run");
  }
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  absl::StatusOr<std::vector<ToWorker>> initial =
      shard_.Join(options.signature, options.rank, /*takes_plan=*/true);
  if (!initial.ok()) return initial.status();
  if (send_queue_ == nullptr) {
    send_queue_ = std::make_unique<SendQueue<Delivery>>(
        SendQueueOptions{.priority = options.signature.priority});
  }
  LinkState& link = links_[options.rank];
  link.lane = send_queue_->AddLane();
  // A worker that links while a re-plan is pending learns of it here, as from a server.
  if (std::optional<std::pair<uint64_t, int64_t>> replan = shard_.ReplanPending()) {
    Push(link,
         Delivery{.message = Downstream{.kind = Downstream::Kind::kReplan,
                                        .from_iteration = replan->first,
                                        .slice_params = replan->second}},
         SendQueue<Delivery>::kUrgent, 0, 0);
  }
  // A worker that links mid-run (elastic) learns every membership change so far.
  const std::vector<MembershipChange> membership = shard_.Membership();
  for (size_t i = 1; i < membership.size(); ++i) {
    Push(link,
         Delivery{.message = Downstream{
                      .kind = Downstream::Kind::kMembership,
                      .from_iteration = membership[i].from_iteration,
                      .present = std::make_shared<const std::vector<int>>(membership[i].present)}},
         SendQueue<Delivery>::kUrgent, 0, 0);
  }
  for (const ToWorker& m : *initial) {  // all to this worker
    Push(link, Delivery{.message = m.message}, m.priority, m.message.slice_id, m.bytes);
  }
  return shard_.start_version();
}

void InMemoryServer::Receive(int rank, const Upstream& message, int64_t max_message_params) {
  {
    absl::MutexLock lock(&mu_);
    // A link that ended, or a run that failed, takes nothing more (a stream would be
    // cancelled by now).
    auto link = links_.find(rank);
    if (!failure_.ok() || link == links_.end() || link->second.ended) return;
  }
  std::vector<ToWorker> out;
  const absl::Status status = Handle(rank, message, max_message_params, &out);
  absl::MutexLock lock(&mu_);
  if (!status.ok()) {
    FailLocked(rank, status);
    return;
  }
  if (message.kind == Upstream::Kind::kDone) {
    if (shard_.Finish(rank)) all_done_ = true;
    LinkState& link = links_.at(rank);
    if (!link.ended) {
      // As a stream's handler returns after the Done: what is still queued is dropped.
      Push(link, Delivery{.end = absl::OkStatus()}, SendQueue<Delivery>::kUrgent, 0, 0);
      link.ended = true;
    }
    return;
  }
  if (message.kind == Upstream::Kind::kReplan || message.kind == Upstream::Kind::kMembership) {
    // Ahead of anything queued, to every worker (docs/protocol.md, "Re-plan").
    const Downstream::Kind kind = message.kind == Upstream::Kind::kReplan
                                      ? Downstream::Kind::kReplan
                                      : Downstream::Kind::kMembership;
    for (auto& [other, link] : links_) {
      if (link.ended) continue;
      Push(link,
           Delivery{.message = Downstream{.kind = kind,
                                          .from_iteration = message.from_iteration,
                                          .slice_params = message.slice_params,
                                          .present = message.present}},
           SendQueue<Delivery>::kUrgent, 0, 0);
    }
    return;
  }
  for (const ToWorker& m : out) {
    auto link = links_.find(m.rank);
    if (link == links_.end() || link->second.ended) continue;  // that worker has gone
    Push(link->second, Delivery{.message = m.message}, m.priority, m.message.slice_id, m.bytes);
  }
}

absl::Status InMemoryServer::Handle(int rank, const Upstream& up, int64_t max_message_params,
                                    std::vector<ToWorker>* out) {
  absl::Status status;
  switch (up.kind) {
    case Upstream::Kind::kInit:
      WriteInParts(up.length, max_message_params, [&](int64_t offset, int64_t count) {
        absl::StatusOr<std::vector<ToWorker>> init =
            shard_.Init(rank, up.slice_id, up.values + offset, count, offset);
        status = init.status();
        if (init.ok()) out->insert(out->end(), init->begin(), init->end());
        return status.ok();
      });
      return status;
    case Upstream::Kind::kGradient: {
      const WireDType dtype = up.encoding.dtype;
      const int scale = up.encoding.scale_exponent.value_or(0);
      std::string encoded;
      WriteInParts(up.length, max_message_params, [&](int64_t offset, int64_t count) {
        if (dtype == WireDType::kFloat32) {
          status = shard_.Gradient(rank, up.slice_id, up.iteration, up.values + offset, count,
                                   offset, out);
          return status.ok();
        }
        // As the gRPC writer encodes it, so that the shard decodes what a stream carries.
        encoded.resize(static_cast<size_t>(count) * BytesPerValue(dtype));
        EncodeValues(dtype, up.values + offset, count, scale, encoded.data());
        const std::vector<absl::string_view> segments = {encoded};
        status = shard_.Gradient(rank, up.slice_id, up.iteration, segments, offset, out,
                                 up.encoding.scale_exponent);
        return status.ok();
      });
      return status;
    }
    case Upstream::Kind::kPull:
      return AppendTo(shard_.Pull(rank, up.slice_id, up.version), out);
    case Upstream::Kind::kBuffers:
      return AppendTo(shard_.Buffers(rank, up.round, up.buffers->data(),
                                     static_cast<int64_t>(up.buffers->size())),
                      out);
    case Upstream::Kind::kResume:
      return AppendTo(shard_.Resume(rank, up.version), out);
    case Upstream::Kind::kReplan:
      return shard_.Replan(rank, up.from_iteration, up.slice_params);
    case Upstream::Kind::kMembership:
      return shard_.ChangeMembership(rank, up.from_iteration, *up.present);
    case Upstream::Kind::kReached:
      return shard_.Reached(rank, up.version);
    case Upstream::Kind::kDone:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

std::optional<SendQueue<InMemoryServer::Delivery>::Item> InMemoryServer::Next(int rank) {
  int lane = 0;
  SendQueue<Delivery>* queue = nullptr;
  {
    absl::MutexLock lock(&mu_);
    lane = links_.at(rank).lane;
    queue = send_queue_.get();
  }
  return queue->Pop(lane);
}

void InMemoryServer::Release(int rank, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  send_queue_->Release(links_.at(rank).lane, bytes);
}

void InMemoryServer::Unlink(int rank) {
  absl::MutexLock lock(&mu_);
  auto link = links_.find(rank);
  if (link == links_.end()) return;
  if (!link->second.ended) {
    FailLocked(rank, absl::UnavailableError(
                         absl::StrCat("worker ", rank, " disconnected before it was done")));
    link->second.ended = true;
  }
  send_queue_->Close(link->second.lane);
}

void InMemoryServer::ReleaseLink(int rank) {
  absl::MutexLock lock(&mu_);
  auto link = links_.find(rank);
  if (link == links_.end()) return;
  send_queue_->ReleaseLane(link->second.lane);
  links_.erase(link);
}

// ---- a worker's link -----------------------------------------------------------------

class InMemoryTransport : public Transport {
 public:
  static absl::StatusOr<std::unique_ptr<Transport>> Open(const TransportOptions& options,
                                                         InMemoryServer* server);
  ~InMemoryTransport() override { Shutdown(); }

  void Send(const ToServer& message) override {
    send_queue_->Push(lane_, message.message, message.priority, message.tiebreak, message.bytes);
  }
  absl::Status Close(absl::Time deadline) override;
  void Shutdown() override;
  uint64_t start_version() const override { return start_version_; }
  PlanInForce plan_in_force() const override { return server_->shard().plan_in_force(); }
  bool wants_reached() const override { return server_->shard().wants_reached(); }
  int64_t bytes_sent() const override { return bytes_sent_.load(); }
  int64_t bytes_received() const override { return bytes_received_.load(); }

 private:
  InMemoryTransport(const TransportOptions& options, InMemoryServer* server)
      : options_(options),
        server_(server),
        end_(options.server_index, options.address, "link", options.listener) {}
  void WriteLoop();
  void ReadLoop();
  // One of the shard's answers to the core (values, Ack) or the listener (buffers).
  absl::Status Deliver(const Downstream& d);
  const TransportOptions options_;
  InMemoryServer* const server_;
  uint64_t start_version_ = 0;
  std::unique_ptr<SendQueue<Upstream>> own_send_queue_;
  SendQueue<Upstream>* send_queue_ = nullptr;
  int lane_ = 0;
  std::thread writer_;
  std::thread reader_;
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
  ReceivedValues received_;  // the reader's, reused from part to part
  LinkEnd end_;

  absl::Mutex mu_;
  bool writer_done_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<Transport>> InMemoryTransport::Open(const TransportOptions& options,
                                                                   InMemoryServer* server) {
  if (options.core == nullptr || options.listener == nullptr) {
    return absl::InvalidArgumentError("a transport needs a core and a listener");
  }
  std::unique_ptr<InMemoryTransport> transport(new InMemoryTransport(options, server));
  if (options.tls) {
    return transport->end_.Named(absl::InvalidArgumentError("an in-memory link has no TLS"));
  }
  absl::StatusOr<uint64_t> start = server->Link(options);
  if (!start.ok()) return transport->end_.Named(start.status());
  transport->start_version_ = *start;
  if (options.send_queue != nullptr) {
    transport->send_queue_ = options.send_queue;
  } else {
    transport->own_send_queue_ = std::make_unique<SendQueue<Upstream>>(SendQueueOptions{
        .priority = options.signature.priority,
        .credit_bytes = options.credit_bytes,
        .stalled_after = options.stalled_write});
    transport->send_queue_ = transport->own_send_queue_.get();
  }
  transport->lane_ = transport->send_queue_->AddLane();
  InMemoryTransport* t = transport.get();
  t->writer_ = std::thread([t] { t->WriteLoop(); });
  t->reader_ = std::thread([t] { t->ReadLoop(); });
  return std::unique_ptr<Transport>(std::move(transport));
}

void InMemoryTransport::WriteLoop() {
  while (std::optional<SendQueue<Upstream>::Item> item = send_queue_->Pop(lane_)) {
    const Upstream& up = item->value;
    if (options_.before_write) options_.before_write(up);
    if (up.kind == Upstream::Kind::kInit || up.kind == Upstream::Kind::kGradient) {
      bytes_sent_ += up.length * static_cast<int64_t>(BytesPerValue(up.encoding.dtype));
    } else if (up.kind == Upstream::Kind::kBuffers) {
      bytes_sent_ += item->bytes;
    }
    server_->Receive(options_.rank, up, options_.max_message_params);
    send_queue_->Release(lane_, item->bytes);
    if (up.kind == Upstream::Kind::kDone) break;
  }
  send_queue_->Close(lane_);
  absl::MutexLock lock(&mu_);
  writer_done_ = true;
}

absl::Status InMemoryTransport::Deliver(const Downstream& d) {
  const int server = options_.server_index;
  switch (d.kind) {
    case Downstream::Kind::kParams: {
      // The values as the stream would carry them, in parts.
      const Snapshot& snapshot = *d.values;
      const size_t width = BytesPerValue(snapshot.dtype());
      const char* bytes = snapshot.bytes().data();
      const int64_t n = snapshot.size();
      received_.scale_exponent = snapshot.scale_exponent();  // float16 only
      absl::Status status;
      WriteInParts(n, options_.max_message_params, [&](int64_t offset, int64_t count) {
        received_.segments.assign(1, absl::string_view(bytes + offset * width, count * width));
        received_.bytes = static_cast<size_t>(count) * width;
        bytes_received_ += static_cast<int64_t>(received_.bytes);
        status =
            options_.core
                ->Params(server, d.slice_id, d.version, static_cast<uint64_t>(offset), received_)
                .status();
        return status.ok();
      });
      return status;
    }
    case Downstream::Kind::kAck: {
      // Answered on this link, without a trip through the worker.
      absl::StatusOr<ToServer> pull = options_.core->Ack(server, d.slice_id, d.iteration);
      if (!pull.ok()) return pull.status();
      Send(*pull);
      return absl::OkStatus();
    }
    case Downstream::Kind::kBuffers: {
      const absl::string_view values(reinterpret_cast<const char*>(d.buffers->data()),
                                     d.buffers->size() * sizeof(float));
      bytes_received_ += static_cast<int64_t>(values.size());
      options_.listener->OnBuffers(server, d.round, values);
      return absl::OkStatus();
    }
    default:  // the edge's control messages, which ReadLoop handles
      break;
  }
  return absl::OkStatus();
}

void InMemoryTransport::ReadLoop() {
  absl::Status failure;  // this link's own: an answer the core refused
  absl::Status abort;    // the server's Abort
  std::optional<absl::Status> end;
  while (std::optional<SendQueue<InMemoryServer::Delivery>::Item> item =
             server_->Next(options_.rank)) {
    const Downstream& d = item->value.message;
    if (item->value.end.has_value()) {
      end = item->value.end;
    } else if (d.kind == Downstream::Kind::kMembership) {
      options_.listener->OnMembership(options_.server_index, d.from_iteration, *d.present);
    } else if (d.kind == Downstream::Kind::kReplan) {
      options_.listener->OnReplan(options_.server_index, d.from_iteration, d.slice_params);
    } else if (d.kind == Downstream::Kind::kAbort) {
      abort = absl::Status(d.abort.code(), absl::StrCat("server ", options_.server_index,
                                                        " aborted the run: ", d.abort.message()));
    } else {
      failure = Deliver(d);
    }
    server_->Release(options_.rank, item->bytes);
    if (!failure.ok() || !abort.ok() || end.has_value()) break;
  }
  // Nothing more comes in or goes out on this link; the writer stops.
  server_->Unlink(options_.rank);
  send_queue_->Close(lane_);
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&writer_done_));
  }
  absl::Status finished;  // OK: the server closed the link
  if (!end.has_value()) {
    finished = end_.Named(absl::CancelledError("the link was shut down"));
  } else if (!end->ok()) {
    finished = end_.Named(*end);
  }
  end_.Ended(abort, failure, finished);
}

absl::Status InMemoryTransport::Close(absl::Time deadline) {
  end_.Closing();
  send_queue_->Push(lane_, Upstream{.kind = Upstream::Kind::kDone},
                    std::numeric_limits<int64_t>::max(), 0, 0);
  return end_.Await(deadline);
}

void InMemoryTransport::Shutdown() {
  if (send_queue_ == nullptr) return;  // never linked
  send_queue_->Close(lane_);
  server_->Unlink(options_.rank);
  if (writer_.joinable()) writer_.join();
  if (reader_.joinable()) reader_.join();
  server_->ReleaseLink(options_.rank);
}

absl::StatusOr<std::unique_ptr<Transport>> OpenInMemoryTransport(const TransportOptions& options,
                                                                 InMemoryServer* server) {
  return InMemoryTransport::Open(options, server);
}

TransportFactory InMemoryTransportFactory(std::vector<InMemoryServer*> servers) {
  return [servers = std::move(servers)](
             const TransportOptions& options) -> absl::StatusOr<std::unique_ptr<Transport>> {
    if (options.server_index < 0 || options.server_index >= static_cast<int>(servers.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no in-memory server ", options.server_index,
                                                     " (", servers.size(), " given)"));
    }
    return InMemoryTransport::Open(options, servers[options.server_index]);
  };
}

}  // namespace p3
