// The wire codec's decoder (proto/wire_codec.h): whatever the bytes and however they are
// cut into slices, the result is protobuf's parse, or InvalidArgument where protobuf
// refuses them.
#include "proto/wire_codec.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/p3.pb.h"
#include "tests/proto/wire_codec_test_util.h"

namespace p3 {
namespace {

// `bytes` cut at the given (increasing) positions, each piece its own slice (a copy).
grpc::ByteBuffer SplitAt(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t from = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + from, cut - from);
    from = cut;
  }
  slices.emplace_back(bytes.data() + from, bytes.size() - from);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer OneSlice(const std::string& bytes) { return SplitAt(bytes, {}); }

const wire::SliceData* SliceOf(const wire::WorkerMessage& m) {
  if (m.has_init()) return &m.init();
  if (m.has_gradient()) return &m.gradient();
  return nullptr;
}
const wire::SliceData* SliceOf(const wire::ServerMessage& m) {
  return m.has_params() ? &m.params() : nullptr;
}

// The decoded message says what protobuf's parse of the same bytes says.
template <typename Message>
void CheckSameAsProtobuf(const DecodedMessage<Message>& d, const Message& parsed) {
  CATCH_CHECK(d.field == static_cast<int>(parsed.kind_case()));
  const wire::SliceData* slice = SliceOf(parsed);
  CATCH_REQUIRE(d.is_slice == (slice != nullptr));
  if (slice != nullptr) {
    CATCH_CHECK(d.header.slice_id == slice->slice_id());
    // The wire's `iteration`, whichever it counts (SliceHeader): one field.
    CATCH_CHECK(d.header.iteration() == slice->iteration());
    CATCH_CHECK(d.header.offset == slice->offset());
    CATCH_CHECK(d.header.shared_count == slice->shared_count());
    CATCH_CHECK(d.header.has_scale_exponent == slice->has_scale_exponent());
    CATCH_CHECK(d.header.scale_exponent == slice->scale_exponent());
    CATCH_CHECK(d.value_bytes == slice->values().size());
    CATCH_CHECK(Concat(d.values) == slice->values());
  } else {
    CATCH_CHECK(d.control.SerializeAsString() == parsed.SerializeAsString());
  }
}

// Decodes `buffer` and checks it against protobuf's parse of `bytes` (which must succeed).
template <typename Message>
void CheckDecodesLikeProtobuf(grpc::ByteBuffer buffer, const std::string& bytes,
                              DecodedMessage<Message>* d) {
  Message parsed;
  CATCH_REQUIRE(parsed.ParseFromString(bytes));
  const absl::Status s = Decode(&buffer, d);
  CATCH_REQUIRE(s.ok());
  CheckSameAsProtobuf(*d, parsed);
}

std::vector<wire::WorkerMessage> WorkerExamples() {
  std::vector<wire::WorkerMessage> out;
  wire::WorkerMessage m;
  wire::Hello* hello = m.mutable_hello();
  hello->set_protocol_version(1);
  hello->set_num_workers(3);
  hello->set_rank(2);
  wire::TensorSpec* t = hello->add_tensors();
  t->set_name("fc/0");
  t->add_shape(10);
  t->add_shape(20);
  t->set_dtype(wire::FLOAT32);
  hello->set_token("secret");
  hello->set_shared_memory_nonce(0x0123456789abcdefull);
  out.push_back(m);
  m.Clear();
  m.mutable_init()->set_slice_id(4);
  m.mutable_init()->set_values(RandomBytes(160, 1));
  out.push_back(m);
  m.Clear();
  m.mutable_gradient()->set_slice_id(0xffffffffu);
  m.mutable_gradient()->set_iteration(1ull << 40);
  m.mutable_gradient()->set_offset(40000);
  m.mutable_gradient()->set_values(RandomBytes(37, 2));  // not a multiple of 4
  out.push_back(m);
  m.Clear();
  m.mutable_gradient();  // every field zero: an empty SliceData
  out.push_back(m);
  m.Clear();
  m.mutable_gradient()->set_slice_id(9);
  m.mutable_gradient()->set_iteration(3);
  m.mutable_gradient()->set_offset(8);
  m.mutable_gradient()->set_shared_count(40000);
  out.push_back(m);
  m.Clear();
  // float16 gradients: a negative, a zero (present) and a positive scale exponent.
  for (int e : {-37, 0, 24}) {
    m.mutable_gradient()->set_slice_id(5);
    m.mutable_gradient()->set_scale_exponent(e);
    m.mutable_gradient()->set_values(RandomBytes(98, 5));
    out.push_back(m);
    m.Clear();
  }
  m.mutable_gradient()->set_scale_exponent(INT32_MIN);
  out.push_back(m);
  m.Clear();
  m.mutable_pull()->set_slice_id(7);
  m.mutable_pull()->set_version(12);
  out.push_back(m);
  m.Clear();
  m.mutable_done();
  out.push_back(m);
  m.Clear();
  out.push_back(m);  // nothing set
  return out;
}

std::vector<wire::ServerMessage> ServerExamples() {
  std::vector<wire::ServerMessage> out;
  wire::ServerMessage m;
  m.mutable_welcome()->set_server_index(1);
  m.mutable_welcome()->set_start_version(5);
  m.mutable_welcome()->set_shared_memory(true);
  out.push_back(m);
  m.Clear();
  m.mutable_params()->set_slice_id(2);
  m.mutable_params()->set_iteration(6);
  m.mutable_params()->set_values(RandomBytes(4000, 3));
  out.push_back(m);
  m.Clear();
  m.mutable_params()->set_offset(1);
  m.mutable_params()->set_shared_count(1u << 20);
  out.push_back(m);
  m.Clear();
  m.mutable_params()->set_slice_id(3);
  m.mutable_params()->set_scale_exponent(-100);
  m.mutable_params()->set_values(RandomBytes(2000, 6));
  out.push_back(m);
  m.Clear();
  m.mutable_ack()->set_slice_id(3);
  m.mutable_ack()->set_iteration(4);
  out.push_back(m);
  m.Clear();
  m.mutable_abort()->set_code(14);
  m.mutable_abort()->set_message("worker 2 is gone");
  out.push_back(m);
  return out;
}

CATCH_TEST_CASE("protobuf-serialised messages of every kind decode to the same fields") {
  DecodedWorkerMessage dw;
  for (const wire::WorkerMessage& m : WorkerExamples()) {
    const std::string bytes = m.SerializeAsString();
    CheckDecodesLikeProtobuf(OneSlice(bytes), bytes, &dw);
    CheckDecodesLikeProtobuf(EncodeMessage(m), bytes, &dw);
  }
  DecodedServerMessage ds;
  for (const wire::ServerMessage& m : ServerExamples()) {
    const std::string bytes = m.SerializeAsString();
    CheckDecodesLikeProtobuf(OneSlice(bytes), bytes, &ds);
  }
  // A large slice (1M floats) with every header field set.
  wire::WorkerMessage big;
  big.mutable_init()->set_slice_id(77);
  big.mutable_init()->set_iteration(1);
  big.mutable_init()->set_offset(1 << 22);
  big.mutable_init()->set_values(RandomBytes(4 << 20, 4));
  const std::string bytes = big.SerializeAsString();
  CheckDecodesLikeProtobuf(OneSlice(bytes), bytes, &dw);
  CATCH_CHECK(dw.value_bytes == (4u << 20));
}

CATCH_TEST_CASE("a message cut into slices at any byte position decodes identically") {
  DecodedWorkerMessage dw;
  for (const wire::WorkerMessage& m : WorkerExamples()) {
    const std::string bytes = m.SerializeAsString();
    for (size_t cut = 0; cut <= bytes.size(); ++cut) {
      CheckDecodesLikeProtobuf(SplitAt(bytes, {cut}), bytes, &dw);
    }
    std::vector<size_t> every_byte;
    for (size_t i = 1; i < bytes.size(); ++i) every_byte.push_back(i);
    CheckDecodesLikeProtobuf(SplitAt(bytes, every_byte), bytes, &dw);
  }
  DecodedServerMessage ds;
  for (const wire::ServerMessage& m : ServerExamples()) {
    const std::string bytes = m.SerializeAsString();
    for (size_t a = 0; a <= bytes.size() && a < 40; ++a) {
      for (size_t b = a; b <= bytes.size() && b < 40; ++b) {
        CheckDecodesLikeProtobuf(SplitAt(bytes, {a, b}), bytes, &ds);
      }
    }
  }
  // Large: 1M floats cut at many random places, ten times.
  wire::ServerMessage big;
  big.mutable_params()->set_slice_id(3);
  big.mutable_params()->set_iteration(9);
  big.mutable_params()->set_values(RandomBytes(4 << 20, 5));
  const std::string bytes = big.SerializeAsString();
  std::mt19937_64 rng(6);
  for (int round = 0; round < 10; ++round) {
    std::vector<size_t> cuts;
    for (int i = 0; i < 64; ++i) cuts.push_back(rng() % (bytes.size() + 1));
    cuts.push_back(1);  // inside the top-level length prefix
    cuts.push_back(3);
    std::sort(cuts.begin(), cuts.end());
    CheckDecodesLikeProtobuf(SplitAt(bytes, cuts), bytes, &ds);
    CATCH_CHECK(ds.values.size() > 10);  // the views follow the slices
  }
}

CATCH_TEST_CASE("decoded values are views into the received slices, not copies") {
  const std::string values = RandomBytes(1000, 7);
  SliceHeader h;
  h.slice_id = 1;
  grpc::ByteBuffer buffer = EncodeSlice(kParams, h, values.data(), values.size(), nullptr);
  DecodedServerMessage d;
  CATCH_REQUIRE(Decode(&buffer, &d).ok());
  CATCH_REQUIRE(d.values.size() == 1);
  CATCH_CHECK(d.values[0].data() == values.data());
  CATCH_CHECK(d.values[0].size() == values.size());
  CATCH_CHECK(!buffer.Valid());  // Decode took the slices over
}

// Hand-written protobuf bytes.
std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
  return s;
}
std::string Tag(int field, int wire_type) { return Varint((field << 3) | wire_type); }
std::string Bytes(int field, const std::string& payload) {
  return Tag(field, 2) + Varint(payload.size()) + payload;
}
std::string VarintField(int field, uint64_t v) { return Tag(field, 0) + Varint(v); }

CATCH_TEST_CASE("legal but unusual encodings decode as protobuf parses them") {
  const std::string vals_a = RandomBytes(12, 8);
  const std::string vals_b = RandomBytes(20, 9);
  const std::vector<std::string> worker_inputs = {
      // The same scalar twice: the last wins.
      Bytes(3, VarintField(1, 4) + VarintField(1, 6) + Bytes(3, vals_a)),
      // Values twice: the last wins.
      Bytes(3, Bytes(3, vals_a) + VarintField(2, 1) + Bytes(3, vals_b)),
      // Canonical field order (values before offset and shared_count).
      Bytes(2, VarintField(1, 1) + Bytes(3, vals_a) + VarintField(4, 3) + VarintField(5, 0)),
      // An unknown field inside the SliceData and at the top level.
      Bytes(3, VarintField(1, 2) + VarintField(9, 77) + Bytes(3, vals_a)),
      Bytes(3, Bytes(3, vals_a)) + VarintField(15, 1),
      // Two oneof members: the last one set wins.
      Bytes(2, Bytes(3, vals_a)) + Bytes(3, VarintField(1, 8) + Bytes(3, vals_b)),
      Bytes(3, Bytes(3, vals_a)) + Bytes(4, VarintField(1, 8)),
      // The same member twice: the SliceData messages merge.
      Bytes(3, VarintField(1, 1) + Bytes(3, vals_a)) + Bytes(3, VarintField(2, 5)),
      // Non-minimal varints and a two-byte tag.
      Bytes(3, Tag(1, 0) + std::string("\x85\x80\x80\x00", 4) + Bytes(3, vals_a)),
      std::string("\x9a\x00", 2) + Varint(2 + vals_a.size()) + Bytes(3, vals_a),
      Tag(3, 2) + std::string("\x8e\x80\x00", 3) + Bytes(3, vals_a),
      // slice_id past 32 bits: protobuf keeps the low 32 bits.
      Bytes(3, VarintField(1, (1ull << 40) + 17) + Bytes(3, vals_a)),
      // A 10-byte varint whose last byte carries bits past 64.
      Bytes(3, Tag(2, 0) + std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10)),
      // A known field with another wire type: kept as an unknown field.
      Bytes(3, Tag(1, 5) + std::string("\x01\x02\x03\x04", 4) + Bytes(3, vals_a)),
      Bytes(3, Tag(3, 0) + Varint(5)),
      // An empty values field.
      Bytes(3, VarintField(1, 3) + Bytes(3, "")),
      // Empty message.
      "",
  };
  DecodedWorkerMessage d;
  for (const std::string& bytes : worker_inputs) {
    CATCH_INFO("input of " << bytes.size() << " bytes");
    CheckDecodesLikeProtobuf(OneSlice(bytes), bytes, &d);
    for (size_t cut = 0; cut <= bytes.size(); ++cut) {
      CheckDecodesLikeProtobuf(SplitAt(bytes, {cut}), bytes, &d);
    }
  }
  // Spot checks that the cases mean what their comments say.
  CheckDecodesLikeProtobuf(OneSlice(worker_inputs[0]), worker_inputs[0], &d);
  CATCH_CHECK(d.header.slice_id == 6);
  CheckDecodesLikeProtobuf(OneSlice(worker_inputs[5]), worker_inputs[5], &d);
  CATCH_CHECK(d.field == kGradient);
  CATCH_CHECK(Concat(d.values) == vals_b);
  CheckDecodesLikeProtobuf(OneSlice(worker_inputs[7]), worker_inputs[7], &d);
  CATCH_CHECK(d.header.slice_id == 1);
  CATCH_CHECK(d.header.iteration() == 5);
  CATCH_CHECK(Concat(d.values) == vals_a);
  CheckDecodesLikeProtobuf(OneSlice(worker_inputs[11]), worker_inputs[11], &d);
  CATCH_CHECK(d.header.slice_id == 17);
}

CATCH_TEST_CASE("malformed input is refused with InvalidArgument, never read past the end") {
  DecodedWorkerMessage d;
  wire::WorkerMessage valid;
  valid.mutable_gradient()->set_slice_id(300);
  valid.mutable_gradient()->set_iteration(70000);
  valid.mutable_gradient()->set_offset(5);
  valid.mutable_gradient()->set_values(RandomBytes(40, 10));
  const std::string bytes = valid.SerializeAsString();
  // Every strict, non-empty prefix is cut off somewhere; also cut again into slices.
  for (size_t n = 1; n < bytes.size(); ++n) {
    const std::string prefix = bytes.substr(0, n);
    wire::WorkerMessage parsed;
    CATCH_REQUIRE(!parsed.ParseFromString(prefix));
    grpc::ByteBuffer one = OneSlice(prefix);
    const absl::Status s = Decode(&one, &d);
    CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    for (size_t cut = 0; cut <= n; ++cut) {
      grpc::ByteBuffer split = SplitAt(prefix, {cut});
      CATCH_CHECK(Decode(&split, &d).code() == absl::StatusCode::kInvalidArgument);
    }
  }
  const std::vector<std::string> malformed = {
      // An 11-byte varint.
      Bytes(3, Tag(1, 0) + std::string(10, '\xff') + std::string(1, '\x01')),
      // A 10-byte varint still continuing at the end of the SliceData.
      Bytes(3, Tag(2, 0) + std::string(10, '\xff')),
      // Values longer than the SliceData, shorter than the whole buffer.
      Bytes(3, Tag(3, 2) + Varint(30) + std::string(5, 'x')) + std::string(40, '\x00'),
      // Top-level length past the end.
      Tag(3, 2) + Varint(1000) + Bytes(3, "abc"),
      // Field number 0, wire types 6 and 7, a lone end-group.
      Bytes(3, Tag(0, 0) + Varint(1)),
      Bytes(3, Tag(1, 6) + Varint(1)),
      Tag(3, 7) + Varint(1),
      Bytes(3, Tag(4, 4)),
      // A length prefix of six bytes (protobuf reads at most five).
      Tag(3, 2) + std::string("\x83\x80\x80\x80\x80\x00", 6) + "abc",
  };
  for (const std::string& input : malformed) {
    wire::WorkerMessage parsed;
    CATCH_REQUIRE(!parsed.ParseFromString(input));
    for (size_t cut = 0; cut <= input.size(); ++cut) {
      grpc::ByteBuffer buffer = SplitAt(input, {cut});
      const absl::Status s = Decode(&buffer, &d);
      CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CATCH_CHECK(!s.message().empty());
    }
  }
  // The fast path says what is wrong.
  grpc::ByteBuffer past_end = OneSlice(Tag(3, 2) + Varint(1000) + Bytes(3, "abc"));
  const absl::Status s = Decode(&past_end, &d);
  CATCH_CHECK(std::string(s.message()).find("runs past the end") != std::string::npos);
  // After an error the decoder decodes the next message normally.
  CheckDecodesLikeProtobuf(OneSlice(bytes), bytes, &d);
}

}  // namespace
}  // namespace p3
