// A worker's message to one server: what the worker's core (p3/core/worker_core.h) says to
// send, and what a transport (worker/transport.h) writes. Everything the writer needs
// travels with the message — the counter its kind carries, and for Init and Gradient
// where the values are and how they go on the wire — so that a transport converts it
// without asking the core anything.
//
// Iterations and versions (docs/protocol.md): iteration t reads version t of every slice
// and sends its gradient of t; the servers answer with version t+1. A gradient names its
// iteration, a Pull or Resume a version. On the wire some of these share a field name;
// each transport maps them in one place (the gRPC one: SliceData's in proto/wire_codec.h,
// the control messages' in worker/server_connection.cc).
//
// Example:
//   ToServer m = *core.Gradient(/*slice_id=*/3, /*iteration=*/7);
//   // m.message.values: the slice's gradient in the flat buffer, m.message.length values;
//   // m.message.encoding: float32, bfloat16, or float16 with the slice's scale exponent.
//   transports[m.server]->Send(m);
#ifndef P3_P3_CORE_TO_SERVER_H_
#define P3_P3_CORE_TO_SERVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "p3/core/wire_dtype.h"

namespace p3 {

// How the values of one message are encoded on the wire.
struct ValueEncoding {
  // Default: float32.
  WireDType dtype = WireDType::kFloat32;
  // float16 only: the exponent of the scale, chosen over the whole slice (every part of a
  // slice sent in parts carries the same one). Default: none.
  std::optional<int> scale_exponent;
};

// A message to one server, as a descriptor: the values stay in the worker's buffers.
struct Upstream {
  // kBuffers: the model's buffers for their mean over the workers (server 0 only;
  // p3/core/buffer_average.h); not part of the WorkerCore's protocol state.
  // kReplan: rank 0's re-plan, to every server; not part of the WorkerCore's protocol
  // state either. kMembership: rank 0's membership change (elastic runs), likewise.
  // kReached: rank 0 holds every slice at `version`, to a server that owns no slice
  // (Transport::wants_reached), likewise.
  enum class Kind {
    kInit, kGradient, kPull, kDone, kResume, kBuffers, kReplan, kMembership, kReached
  };
  Kind kind = Kind::kGradient;
  // kInit, kGradient, kPull: the slice, in the plan that was current when the message
  // was made.
  int slice_id = 0;
  // kGradient: the iteration whose gradient this is.
  uint64_t iteration = 0;
  // kPull: the version wanted; kResume: the version the worker resumes at; kReached: the
  // version every slice has reached.
  uint64_t version = 0;
  // kBuffers: the exchange's round (the iteration every worker calls AverageBuffers at),
  // and this worker's float32 buffers.
  uint64_t round = 0;
  std::shared_ptr<const std::vector<float>> buffers;
  // kReplan: the first iteration of the new plan, and its slice size. kMembership: the
  // first iteration of the present set `present` (increasing ranks).
  uint64_t from_iteration = 0;
  int64_t slice_params = 0;
  std::shared_ptr<const std::vector<int>> present;
  // kInit, kGradient: the slice's `length` float32 values in the worker's flat buffer
  // (the parameters for kInit, the gradient for kGradient). The protocol keeps them
  // unchanged until the server has them: a gradient's region is written again only in the
  // next backward pass, after the updated values, which need every worker's gradient,
  // have come back; the parameters sent by Init, only by the servers' values. Null when
  // the core has no buffers (the simulator).
  const float* values = nullptr;
  int64_t length = 0;
  // kInit: float32 (initial values always are); kGradient: the wire's dtype, with the
  // scale exponent of the whole slice for float16, taken when the message was made (the
  // gradient is complete then).
  ValueEncoding encoding;
};

// What the transport must send: `message` to server `server`, ordered in that server's
// send queue by `priority` (smaller first), then `tiebreak`. `bytes` of values go with it
// on the wire (0 for a Pull; 2 per value for a gradient on a 16-bit wire).
struct ToServer {
  int server = 0;
  Upstream message;
  int64_t priority = 0;
  int64_t tiebreak = 0;
  int64_t bytes = 0;
};

}  // namespace p3

#endif  // P3_P3_CORE_TO_SERVER_H_
