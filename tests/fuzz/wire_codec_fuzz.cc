// Fuzz target: the zero-copy decoder (proto/wire_codec.h) against protobuf's own parser.
//
// Input layout: byte 0: bit 0 picks the message type (0: WorkerMessage, 1: ServerMessage),
// bits 1-4 the number k of extra cuts; then k bytes, each the distance from the previous
// cut; the rest is the message, cut into k + 1 gRPC slices at those places (cuts past the
// end give empty slices).
//
// Whatever the bytes: if protobuf's ParseFromString accepts the message, Decode accepts
// it with the same fields and values; if protobuf refuses it, Decode returns
// InvalidArgument. Never a crash or a read out of bounds (run under ASan by tools/fuzz.sh).
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "proto/p3.pb.h"
#include "proto/wire_codec.h"
#include "tests/fuzz/fuzz_seeds.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

const p3::wire::SliceData* SliceOf(const p3::wire::WorkerMessage& m) {
  if (m.has_init()) return &m.init();
  if (m.has_gradient()) return &m.gradient();
  return nullptr;
}
const p3::wire::SliceData* SliceOf(const p3::wire::ServerMessage& m) {
  return m.has_params() ? &m.params() : nullptr;
}

template <typename Message>
void Differential(const std::vector<grpc::Slice>& slices, const std::string& bytes) {
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  p3::DecodedMessage<Message> decoded;
  const absl::Status status = p3::Decode(&buffer, &decoded);
  Message parsed;
  if (!parsed.ParseFromString(bytes)) {
    Check(status.code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  Check(status.ok());
  Check(decoded.field == static_cast<int>(parsed.kind_case()));
  const p3::wire::SliceData* slice = SliceOf(parsed);
  Check(decoded.is_slice == (slice != nullptr));
  if (slice == nullptr) {
    Check(decoded.control.SerializeAsString() == parsed.SerializeAsString());
    return;
  }
  Check(decoded.header.slice_id == slice->slice_id());
  Check(decoded.header.iteration() == slice->iteration());  // or version(): one field
  Check(decoded.header.offset == slice->offset());
  Check(decoded.header.shared_count == slice->shared_count());
  Check(decoded.header.has_scale_exponent == slice->has_scale_exponent());
  Check(decoded.header.scale_exponent == slice->scale_exponent());
  Check(decoded.value_bytes == slice->values().size());
  std::string values;
  for (absl::string_view part : decoded.values) values.append(part.data(), part.size());
  Check(values == slice->values());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every string field with invalid UTF-8 it refuses; millions of lines.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  if (size < 1) return 0;
  const bool server = data[0] & 1;
  const size_t cuts = (data[0] >> 1) & 15;
  if (size < 1 + cuts) return 0;
  const char* message = reinterpret_cast<const char*>(data + 1 + cuts);
  const size_t length = size - 1 - cuts;
  std::vector<grpc::Slice> slices;
  size_t from = 0;
  for (size_t i = 0; i < cuts; ++i) {
    const size_t to = std::min(length, from + data[1 + i]);
    slices.emplace_back(message + from, to - from);
    from = to;
  }
  slices.emplace_back(message + from, length - from);
  const std::string bytes(message, length);
  if (server) {
    Differential<p3::wire::ServerMessage>(slices, bytes);
  } else {
    Differential<p3::wire::WorkerMessage>(slices, bytes);
  }
  return 0;
}

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> messages[2];  // worker, server
  p3::wire::WorkerMessage w;
  w.mutable_hello()->set_protocol_version(1);
  w.mutable_hello()->set_num_workers(2);
  w.mutable_hello()->add_tensors()->set_name("w");
  w.mutable_hello()->set_token("t");
  messages[0].push_back(w.SerializeAsString());
  w.Clear();
  w.mutable_init()->set_slice_id(3);
  w.mutable_init()->set_values(std::string(32, '\x01'));
  messages[0].push_back(w.SerializeAsString());
  w.Clear();
  w.mutable_gradient()->set_slice_id(300);
  w.mutable_gradient()->set_iteration(70000);
  w.mutable_gradient()->set_offset(8);
  w.mutable_gradient()->set_values(std::string(20, '\x02'));
  messages[0].push_back(w.SerializeAsString());
  w.Clear();
  w.mutable_gradient()->set_slice_id(1);
  w.mutable_gradient()->set_shared_count(40000);
  messages[0].push_back(w.SerializeAsString());
  w.Clear();
  w.mutable_gradient()->set_slice_id(2);
  w.mutable_gradient()->set_scale_exponent(-24);  // a float16 gradient
  w.mutable_gradient()->set_values(std::string(10, '\x04'));
  messages[0].push_back(w.SerializeAsString());
  w.Clear();
  w.mutable_pull()->set_slice_id(2);
  w.mutable_pull()->set_version(5);
  messages[0].push_back(w.SerializeAsString());
  w.Clear();
  w.mutable_done();
  messages[0].push_back(w.SerializeAsString());
  p3::wire::ServerMessage s;
  s.mutable_welcome()->set_start_version(4);
  messages[1].push_back(s.SerializeAsString());
  s.Clear();
  s.mutable_params()->set_slice_id(2);
  s.mutable_params()->set_iteration(9);
  s.mutable_params()->set_values(std::string(16, '\x03'));
  messages[1].push_back(s.SerializeAsString());
  s.Clear();
  s.mutable_params()->set_slice_id(2);
  s.mutable_params()->set_scale_exponent(0);  // present though 0
  s.mutable_params()->set_values(std::string(6, '\x05'));
  messages[1].push_back(s.SerializeAsString());
  s.Clear();
  s.mutable_ack()->set_slice_id(1);
  messages[1].push_back(s.SerializeAsString());
  s.Clear();
  s.mutable_abort()->set_code(14);
  s.mutable_abort()->set_message("gone");
  messages[1].push_back(s.SerializeAsString());

  std::vector<std::string> seeds;
  for (int server = 0; server < 2; ++server) {
    for (const std::string& m : messages[server]) {
      seeds.push_back(std::string(1, static_cast<char>(server)) + m);  // one slice
      // Three cuts: inside the tag/length prefix and in the middle.
      seeds.push_back(std::string(1, static_cast<char>(server | (3 << 1))) + "\x01\x02\x05" + m);
    }
  }
  return seeds;
}
