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
//   h.iteration = 12;
//   stream->Write(p3::EncodeSlice(p3::kGradientField, h, grad->data(),
//                                 grad->size() * sizeof(float), grad));
//
//   grpc::ByteBuffer buffer;
//   p3::DecodedServerMessage in;              // reused for every message
//   while (stream->Read(&buffer)) {
//     absl::Status s = p3::Decode(&buffer, &in);
//     if (!s.ok()) ...;                       // InvalidArgument, says what is wrong
//     if (in.is_slice) {
//       char* dst = ...;                      // values may be cut at any byte
//       for (absl::string_view part : in.values) dst = std::copy(part.begin(), part.end(), dst);
//     } else if (in.field == p3::kAckField) {
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

// Field numbers of the `kind` oneof members (proto/p3.proto).
// WorkerMessage:
inline constexpr int kHelloField = 1;
inline constexpr int kInitField = 2;      // SliceData
inline constexpr int kGradientField = 3;  // SliceData
inline constexpr int kPullField = 4;
inline constexpr int kDoneField = 5;
// ServerMessage:
inline constexpr int kWelcomeField = 1;
inline constexpr int kParamsField = 2;  // SliceData
inline constexpr int kAckField = 3;
inline constexpr int kAbortField = 4;

// The scalar fields of a SliceData (everything but `values`). Default: all zero, i.e.
// omitted on the wire as protobuf does.
struct SliceHeader {
  uint32_t slice_id = 0;
  uint64_t iteration = 0;
  uint64_t offset = 0;
  uint64_t shared_count = 0;
  // scale_exponent (float16 streams), written and read with its presence: present even
  // when 0.
  bool has_scale_exponent = false;
  int32_t scale_exponent = 0;
};

// A top-level message whose oneof member number `field` is a SliceData with header `h`
// and the `bytes` bytes at `values` as its values (WorkerMessage: kInitField,
// kGradientField; ServerMessage: kParamsField — the caller picks the field of the
// message type its stream carries). The buffer is two gRPC slices: a small hand-encoded
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
  // The oneof member set (kHelloField, ...), 0 when none.
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
