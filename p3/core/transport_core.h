// What a worker's transport (worker/transport.h) needs from the worker's core: where the
// values a server sends go, and the Pull that answers a server's Ack. A transport hands
// these to the core itself, on its own threads, and sends the Pull back on the same
// link; the core never calls the transport. WorkerCore (p3/core/worker_core.h) implements
// it; a test gives a transport a fake that records what it is handed.
//
// Example (a transport's reader thread):
//   absl::StatusOr<bool> complete = core->Params(server, slice_id, version, offset,
//                                                ReceivedValues{.segments = parts,
//                                                               .bytes = n});
//   if (!complete.ok()) FailLink(complete.status());
//   absl::StatusOr<ToServer> pull = core->Ack(server, slice_id, iteration);
//   if (pull.ok()) Send(*pull);
//
// Implementations are thread-safe: the transports of every server call them at once.
#ifndef P3_P3_CORE_TRANSPORT_CORE_H_
#define P3_P3_CORE_TRANSPORT_CORE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "p3/core/to_server.h"

namespace p3 {

// The values of one received part: bytes to decode, or values the server has written
// into the parameters itself (shared memory with a colocated server).
struct ReceivedValues {
  // Raw bytes in the wire's dtype (float32, bfloat16 or float16), in order, possibly split
  // at any byte (a message's buffers), valid during the call only; `bytes` in all.
  std::vector<absl::string_view> segments;
  size_t bytes = 0;
  // The message's scale_exponent (float16 streams), when it has one.
  std::optional<int> scale_exponent;
  // Non-zero: no bytes; this many values are in place in the parameters already.
  int64_t in_place_count = 0;
};

class TransportCore {
 public:
  virtual ~TransportCore() = default;

  // A part of version `version` of `slice_id` from `server`: the slice's values from
  // `offset` on. Returns true when this part completed the slice. An error means the part
  // does not fit the protocol (nothing changed); the transport fails the link with it.
  virtual absl::StatusOr<bool> Params(int server, int64_t slice_id, uint64_t version,
                                      uint64_t offset, const ReceivedValues& values) = 0;

  // `server` acknowledges this worker's gradient of `slice_id` at `iteration`: the Pull
  // the transport sends back to that server. An error as for Params.
  virtual absl::StatusOr<ToServer> Ack(int server, int64_t slice_id, uint64_t iteration) = 0;
};

}  // namespace p3

#endif  // P3_P3_CORE_TRANSPORT_CORE_H_
