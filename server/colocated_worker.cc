// A worker on the same machine as this server (ParameterServer::Impl, see
// parameter_server_impl.h): its shared memory (p3/core/shared_memory.h) mapped at the
// handshake, its Init and Gradient values read there (ParameterShard, SharedValues), and
// each version written into its parameters with only a descriptor on the stream.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "p3/core/slice_plan.h"
#include "p3/core/snapshot.h"
#include "proto/wire.h"
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

bool ParameterServer::Impl::WriteSharedParamsBatch(Connection* conn,
                                                   SendQueue<Downstream>::Item first,
                                                   TrainStream* stream, absl::Time start) {
  std::vector<SendQueue<Downstream>::Item>& batch = conn->batch;
  batch.clear();
  batch.push_back(std::move(first));
  // Only what is ready now, in the lane's order: a batch is never waited for.
  const int64_t bytes = conn->queue->PopAlsoInto(
      conn->lane, [](const Downstream& d) { return d.kind == Downstream::Kind::kParams; },
      kSharedBatchSend, &batch);
  bool ok = true;
  if (batch.size() == 1) {
    ok = WriteParams(*conn, batch[0].value, stream);
  } else {
    wire::ServerMessage msg;
    wire::SharedSlices* slices = msg.mutable_shared_params();
    for (const SendQueue<Downstream>::Item& item : batch) {
      const Downstream& d = item.value;
      // As WriteSharedParams: into the worker's parameters before its descriptor goes.
      d.values->DecodeTo(conn->shared->params() + d.offset);
      SliceHeader header = ParamsHeader(d);
      header.shared_count = static_cast<uint64_t>(d.values->size());
      SetHeader(header, slices->add_slices());
    }
    ok = stream->Write(EncodeMessage(msg));
  }
  conn->queue->Release(conn->lane, bytes);
  if (tracing()) {
    for (const SendQueue<Downstream>::Item& item : batch) {
      TraceSend(conn->send_track, item.value, item.bytes, start);
    }
  }
  batch.clear();  // the snapshots' references: the shard may reuse their storage
  return ok;
}

}  // namespace p3
