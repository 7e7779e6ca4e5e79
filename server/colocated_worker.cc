// A worker on the same machine as this server (ParameterServer::Impl, see
// parameter_server_impl.h): its shared memory (p3/core/shared_memory.h) mapped at the
// handshake, its Init and Gradient values read there (ParameterShard, SharedValues), and
// each version written into its parameters with only a descriptor on the stream.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>
#include <optional>
#include <utility>

#include "p3/core/slice_plan.h"
#include "p3/core/snapshot.h"
#include "server/parameter_server_impl.h"

namespace p3 {

void ParameterServer::Impl::MapSharedMemory(const wire::Hello& hello, Connection* conn) {
  const std::optional<SlicePlan> plan = shard_.plan();
  absl::StatusOr<std::unique_ptr<SharedRegion>> region = SharedRegion::Open(
      hello.shared_memory_name(), hello.shared_memory_nonce(), plan ? plan->total_params() : 0);
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

bool ParameterServer::Impl::WriteSharedParams(const Connection& conn, const Downstream& d,
                                              SliceHeader header, TrainStream* stream) {
  // Straight into the worker's parameters; only the descriptor goes on the stream.
  // The worker reads this slice again only after it has the message (version order).
  // The offset of the plan the slice id belongs to (a re-plan may have followed).
  d.values->DecodeTo(conn.shared->params() + d.offset);
  header.shared_count = static_cast<uint64_t>(d.values->size());
  return stream->Write(
      EncodeSlice(wire::ServerMessage::kParamsFieldNumber, header, nullptr, 0, nullptr));
}

}  // namespace p3
