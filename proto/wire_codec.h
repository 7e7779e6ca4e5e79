// Zero-copy encoding and decoding of the Train stream's messages (proto/p3.proto) as
// grpc::ByteBuffer, for raw streams (proto/raw_train.h): slice values travel between the
// caller's memory and gRPC's slices without ever being copied into a protobuf string.
//
// On the wire nothing changes: EncodeSlice's output is an ordinary serialised
// WorkerMessage / ServerMessage, and Decode accepts exactly what protobuf's parser
// accepts, with protobuf's meaning (a peer using the generated typed stub or service
// talks to a raw one and vice versa).
//
// Example (a worker sending a gradient and reading what comes down):
//
//   std::shared_ptr<std::vector<float>> grad = ...;   // kept alive while gRPC needs it
//   p3::SliceHeader h;
//   h.slice_id = 7;
//   h.set_iteration(12);
//   stream->Write(p3::EncodeSlice(p3::wire::WorkerMessage::kGradientFieldNumber, h,
//                                 grad->data(), grad->size() * sizeof(float), grad));
//
//   grpc::ByteBuffer buffer;
//   p3::DecodedServerMessage in;              // reused for every message
//   while (stream->Read(&buffer)) {
//     absl::Status s = p3::Decode(&buffer, &in);
//     if (!s.ok()) ...;                       // InvalidArgument, says what is wrong
//     if (in.is_slice) {                      // Params: in.header.version()
//       char* dst = ...;                      // values may be cut at any byte
//       for (absl::string_view part : in.values) dst = std::copy(part.begin(), part.end(), dst);
//     } else if (in.field == p3::wire::ServerMessage::kAckFieldNumber) {
//       Use(in.control.ack());
//     }
//   }
#ifndef P3_PROTO_WIRE_CODEC_H_
#define P3_PROTO_WIRE_CODEC_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "proto/p3.pb.h"

namespace p3 {

// Messages are named by the field number of their `kind` oneof member, as protobuf
// generates it (wire::WorkerMessage::kGradientFieldNumber, wire::ServerMessage::
// kParamsFieldNumber, ...): the SliceData members are WorkerMessage's init and gradient
// and ServerMessage's params.

// The scalar fields of a SliceData (everything but `values`). Default: all zero, i.e.
// omitted on the wire as protobuf does.
//
// Iteration or version: SliceData's field 2 is called `iteration` on the wire
// (proto/p3.proto keeps its name), but what it counts depends on the direction
// (docs/protocol.md, "Iterations and versions"):
//
//   message            direction   SliceData.iteration holds        read and write it as
//   Gradient           up          the iteration of the gradient    iteration()
//   Init               up          0                                iteration()
//   Params             down        the version of the values        version()
//
// This is the one place where the wire's name meets the two meanings: the field is
// stored once, and code reads and writes it under the name of what its message counts.
struct SliceHeader {
  uint32_t slice_id = 0;
  uint64_t offset = 0;
  uint64_t shared_count = 0;
  // scale_exponent (float16 streams), written and read with its presence: present even
  // when 0.
  bool has_scale_exponent = false;
  int32_t scale_exponent = 0;

  // Up (Gradient, Init): the iteration whose gradient this is.
  uint64_t iteration() const { return iteration_or_version_; }
  void set_iteration(uint64_t iteration) { iteration_or_version_ = iteration; }
  // Down (Params): the version of the values.
  uint64_t version() const { return iteration_or_version_; }
  void set_version(uint64_t version) { iteration_or_version_ = version; }

 private:
  uint64_t iteration_or_version_ = 0;  // SliceData.iteration, field 2
};

// The header of a SliceData parsed by protobuf (unusual encodings, the fuzzer's messages).
SliceHeader HeaderOf(const wire::SliceData& slice);
// The other way: `slice`'s scalar fields set to `h` (its values untouched), e.g. for the
// descriptors of a SharedSlices message.
void SetHeader(const SliceHeader& h, wire::SliceData* slice);

// A top-level message whose oneof member number `field` is a SliceData with header `h`
// and the `bytes` bytes at `values` as its values (WorkerMessage: kInitFieldNumber,
// kGradientFieldNumber; ServerMessage: kParamsFieldNumber — the caller picks the field of
// the message type its stream carries). The buffer is two gRPC slices: a small hand-encoded
// protobuf header (top-level tag and length, then slice_id, iteration, offset,
// shared_count when non-zero, scale_exponent when present, then the values tag and length) and one slice pointing at
// `values` itself, not a copy. bytes == 0: no values field at all (shared_count messages).
//
// `keepalive` owns the memory at `values`: the value slice holds a reference to it and
// drops it when gRPC drops its last reference to the slice (every copy of the returned
// buffer destroyed and gRPC done sending), which may be after a synchronous Write has
// returned. `values` must not change until then. With a null keepalive the caller
// guarantees that lifetime itself.
//
// Field order: the values field comes last, after offset and shared_count — legal
// protobuf (fields may come in any order) and what lets the values be the last slice.
// Encoded size must stay below 2 GiB (protobuf's limit); p3 keeps slices far smaller.
grpc::ByteBuffer EncodeSlice(int field, const SliceHeader& h, const void* values, size_t bytes,
                             std::shared_ptr<const void> keepalive);

// The same with values already in a gRPC slice, e.g. one the caller allocated with
// grpc::Slice(bytes) and encoded 16-bit values into (the buffer takes a reference).
grpc::ByteBuffer EncodeSlice(int field, const SliceHeader& h, grpc::Slice values);

// EncodeSlice and EncodeMessage share no state: safe to call from any thread.

// Any message (WorkerMessage, ServerMessage, or for tests anything else) serialised as
// protobuf does, in one buffer. For the control messages (Hello, Welcome, Pull, Ack, Done,
// Abort) wrapped in their top-level message.
grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& m);

// A decoded WorkerMessage or ServerMessage (`Message`), reusable from message to message:
// the vectors keep their capacity, so that decoding slice messages allocates nothing once
// warm. Not thread-safe; one per stream reader.
template <typename Message>
struct DecodedMessage {
  // The oneof member set (its field number, e.g. wire::WorkerMessage::kHelloFieldNumber),
  // 0 when none.
  int field = 0;
  // `field` is a SliceData member: `header`, `values` and `value_bytes` hold it.
  bool is_slice = false;
  SliceHeader header;
  // The values' bytes in order, cut at arbitrary byte positions (not float-aligned), as
  // views into the received gRPC slices (or into `control`, see below). Valid until the
  // next Decode or Release. Their sizes add up to value_bytes; empty when value_bytes is 0.
  std::vector<absl::string_view> values;
  size_t value_bytes = 0;
  // The parsed message when !is_slice. A slice message that needed protobuf's parser (an
  // unusual but legal encoding) is also parsed here and `values` point into it.
  Message control;

  // Drops the references to gRPC's slices (keeping capacity) and empties the views.
  void Release() {
    values.clear();
    slices_.clear();
  }

  // Decode's own state, not for callers: the buffer's slices (references, not copies) that
  // `values` point into, and the bytes of a message in several slices flattened for
  // protobuf's parser (capacity kept up to 64 KiB).
  std::vector<grpc::Slice> slices_;
  std::string flat_;
};

using DecodedWorkerMessage = DecodedMessage<wire::WorkerMessage>;
using DecodedServerMessage = DecodedMessage<wire::ServerMessage>;

// Decodes `*buffer` into `*out`, taking over the buffer's slices without copying them
// (`*buffer` is left empty and can be handed to the next Read). An invalid
// (default-constructed) buffer decodes as the empty message. Common encodings (one
// SliceData member, each of its fields at most once) are read directly from the slices;
// anything else legal (repeated or unknown fields, several oneof members, ...) goes
// through protobuf's parser, so the result always equals ParseFromString's.
// Malformed input: InvalidArgument saying what is wrong; `*out` is then unspecified.
absl::Status Decode(grpc::ByteBuffer* buffer, DecodedWorkerMessage* out);
absl::Status Decode(grpc::ByteBuffer* buffer, DecodedServerMessage* out);

}  // namespace p3

#endif  // P3_PROTO_WIRE_CODEC_H_
