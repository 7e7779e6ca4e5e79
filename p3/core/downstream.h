// What a server sends a worker, in core types: the server side's mirror of the worker's
// ToServer / Upstream (p3/core/to_server.h). A ParameterShard answers each message with
// ToWorker messages (an addressed Downstream); the server's edge queues the Downstream in
// that worker's lane of its send queue (p3/core/send_queue.h), together with its own
// control messages, and its writer thread puts each on the wire (server/).
//
// Example:
//   absl::StatusOr<std::vector<ToWorker>> out = shard.Gradient(rank, slice, iteration, g, n);
//   for (const ToWorker& m : *out) {
//     queue.Push(lane_of[m.rank], m.message, m.priority, m.message.slice_id, m.bytes);
//   }
#ifndef P3_P3_CORE_DOWNSTREAM_H_
#define P3_P3_CORE_DOWNSTREAM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "p3/core/snapshot.h"
#include "p3/core/stall_report.h"

namespace p3 {

// A message to one worker, as a descriptor: the values travel by reference.
struct Downstream {
  // The shard's answers: kParams (a version of a slice), kAck (a gradient acknowledged,
  // modes without values on push), kBuffers (the mean of all workers' buffers,
  // ParameterShard::Buffers). The edge's own control messages, not part of the shard's
  // protocol state: kWelcome (the handshake's answer, filled in by the writer), kStall
  // (a stall report), kReplan (rank 0's re-plan, forwarded), kAbort (the run failed),
  // kMembership (rank 0's membership change in an elastic run, forwarded).
  enum class Kind { kParams, kAck, kBuffers, kWelcome, kStall, kReplan, kAbort, kMembership };
  Kind kind = Kind::kParams;
  // kParams, kAck.
  int slice_id = 0;
  // kParams: the version of the values. Version v is what iteration v reads
  // (docs/protocol.md, "Iterations and versions").
  uint64_t version = 0;
  // kAck: the iteration whose gradient is acknowledged.
  uint64_t iteration = 0;
  // kBuffers: the exchange round.
  uint64_t round = 0;
  // kParams: the slice's first parameter in the flat buffer of all parameters, in the
  // plan the slice id belongs to (a re-plan may have replaced it by the time this is
  // sent), so that the writer needs no plan.
  int64_t offset = 0;
  // kParams: the version's values as they go on the wire, encoded once and shared by
  // every worker's message; null when the shard keeps no values (ShardOptions::
  // keep_values).
  std::shared_ptr<const Snapshot> values;
  // kBuffers: the mean, float32; shared by every worker's message.
  std::shared_ptr<const std::vector<float>> buffers;
  // kReplan: slices are `slice_params` long from iteration `from_iteration` on.
  // kMembership: the workers of `present` take part from iteration `from_iteration` on.
  uint64_t from_iteration = 0;
  int64_t slice_params = 0;
  std::shared_ptr<const std::vector<int>> present;
  // kStall.
  std::shared_ptr<const StallReport> stall;
  // kAbort: why the run failed.
  absl::Status abort;
};

// What the transport must send: `message` to worker `rank`, ordered in that worker's
// lane of the send queue by `priority` (smaller first; the slice's priority), then by
// slice id. `bytes` of values go with it on the wire (2 per value on a 16-bit wire; 0
// for an Ack), for the link's credit.
struct ToWorker {
  int rank = 0;
  Downstream message;
  int64_t priority = 0;
  int64_t bytes = 0;
};

// The float32 values of a kParams or kBuffers message as the worker ends up holding them
// (kParams: its snapshot decoded); empty for other kinds or without values. For tests
// and tools.
std::vector<float> DecodedValues(const Downstream& message);

}  // namespace p3

#endif  // P3_P3_CORE_DOWNSTREAM_H_
