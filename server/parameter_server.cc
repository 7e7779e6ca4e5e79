// ParameterServer's lifecycle: the gRPC server started and shut down, the run's outcome
// awaited, and a worker's failure told to every other stream. The rest of the edge is in
// the files parameter_server_impl.h lists.
#include "server/parameter_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "p3/base/status_macros.h"
#include "proto/wire.h"
#include "server/parameter_server_impl.h"

namespace p3 {
namespace {

// The shard hands its checkpoints to the server's writer thread instead of running
// `on_checkpoint` on the stream handler that completed the iteration.
ShardOptions WithCheckpointWriter(ShardOptions shard, CheckpointWriter* writer) {
  if (writer != nullptr) {
    shard.on_checkpoint = [writer](ShardCheckpoint c) { writer->Submit(std::move(c)); };
  }
  return shard;
}

}  // namespace

ParameterServer::Impl::Impl(const ServerOptions& options)
    : options_(options),
      service_([this](grpc::ServerContext* context, TrainStream* stream) {
        return ToGrpcStatus(Serve(context, stream));
      }),
      checkpoint_writer_(options.shard.on_checkpoint
                             ? std::make_unique<CheckpointWriter>(options.shard.on_checkpoint)
                             : nullptr),
      shard_(WithCheckpointWriter(options.shard, checkpoint_writer_.get())) {}

absl::Status ParameterServer::Impl::Start() {
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
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.address, " (in use by another process?)"));
  }
  if (options_.stall_report > absl::ZeroDuration()) {
    stall_watcher_ = std::thread([this] { WatchStalls(); });
  }
  return absl::OkStatus();
}

absl::Status ParameterServer::Impl::Wait() {
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
    auto first = std::min_element(absent_.begin(), absent_.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
    const int rank = first->first;
    if (!mu_.AwaitWithDeadline(changed, first->second)) {
      absent_.erase(rank);
      FailLocked(
          rank, absl::DeadlineExceededError(absl::StrCat(
                    "died and did not rejoin within ",
                    absl::FormatDuration(options_.rejoin_timeout), " (cluster.rejoin_timeout_s)")));
    }
  }
  return failure_;
}

void ParameterServer::Impl::Shutdown() {
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

size_t ParameterServer::Impl::network_lane_slots() {
  absl::MutexLock lock(&mu_);
  return link_ == nullptr ? 0 : link_->lane_slots();
}

void ParameterServer::Impl::Fail(int rank, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  FailLocked(rank, status);
}

void ParameterServer::Impl::FailLocked(int rank, const absl::Status& status) {
  if (!failure_.ok()) return;
  failure_ = absl::Status(status.code(), absl::StrCat("worker ", rank, ": ", status.message(),
                                                       NotJoinedLocked(rank)));
  for (auto& [other, conn] : streams_) {
    if (other == rank) continue;
    // Ahead of everything queued, in FIFO modes too.
    conn->Push(Downstream{.kind = Downstream::Kind::kAbort, .abort = failure_},
               SendQueue<Downstream>::kUrgent, 0, 0);
  }
}

std::string ParameterServer::Impl::NotJoinedLocked(int rank) const {
  // A worker refused at its Hello (the restored checkpoint does not fit) is not a run that
  // started without some of its workers.
  const std::vector<int> joined = shard_.joined_ranks();
  if (!std::binary_search(joined.begin(), joined.end(), rank)) return "";
  const int initial = options_.shard.initial_workers > 0 ? options_.shard.initial_workers
                                                         : options_.shard.num_workers;
  std::vector<int> missing;
  for (int r = 0; r < initial; ++r) {
    if (!std::binary_search(joined.begin(), joined.end(), r)) missing.push_back(r);
  }
  if (missing.empty()) return "";
  return absl::StrCat("; ", missing.size() == 1 ? "worker " : "workers ",
                      absl::StrJoin(missing, ", "), missing.size() == 1 ? " has" : " have",
                      " not joined this server");
}

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
