#include "proto/wire_codec.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "proto/p3.grpc.pb.h"
#include "proto/p3.pb.h"
#include "proto/raw_train.h"

namespace p3 {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  CATCH_REQUIRE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

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

std::string Concat(const std::vector<absl::string_view>& parts) {
  std::string out;
  for (absl::string_view p : parts) out.append(p.data(), p.size());
  return out;
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

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
    CATCH_CHECK(d.header.iteration == slice->iteration());
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

CATCH_TEST_CASE("EncodeSlice output parses with protobuf into the intended message") {
  const std::string values = RandomBytes(4001, 11);  // also an odd byte count
  SliceHeader h;
  h.slice_id = 123456;
  h.iteration = 1ull << 33;
  h.offset = 99;
  for (int field : {kInitField, kGradientField}) {
    wire::WorkerMessage parsed;
    CATCH_REQUIRE(parsed.ParseFromString(
        Flatten(EncodeSlice(field, h, values.data(), values.size(), nullptr))));
    CATCH_CHECK(static_cast<int>(parsed.kind_case()) == field);
    const wire::SliceData& s = field == kInitField ? parsed.init() : parsed.gradient();
    CATCH_CHECK(s.slice_id() == h.slice_id);
    CATCH_CHECK(s.iteration() == h.iteration);
    CATCH_CHECK(s.offset() == h.offset);
    CATCH_CHECK(s.shared_count() == 0);
    CATCH_CHECK(s.values() == values);
  }
  wire::ServerMessage parsed;
  CATCH_REQUIRE(parsed.ParseFromString(
      Flatten(EncodeSlice(kParamsField, h, values.data(), values.size(), nullptr))));
  CATCH_REQUIRE(parsed.has_params());
  CATCH_CHECK(parsed.params().slice_id() == h.slice_id);
  CATCH_CHECK(parsed.params().values() == values);
}

CATCH_TEST_CASE("EncodeSlice without values and with a shared_count equals protobuf's bytes") {
  SliceHeader h;
  h.slice_id = 5;
  h.iteration = 7;
  h.offset = 40000;
  h.shared_count = 40000;
  const grpc::ByteBuffer buffer = EncodeSlice(kGradientField, h, nullptr, 0, nullptr);
  wire::WorkerMessage expected;
  expected.mutable_gradient()->set_slice_id(5);
  expected.mutable_gradient()->set_iteration(7);
  expected.mutable_gradient()->set_offset(40000);
  expected.mutable_gradient()->set_shared_count(40000);
  // Without values the hand encoding is in field order, exactly what protobuf writes.
  CATCH_CHECK(Flatten(buffer) == expected.SerializeAsString());
  wire::WorkerMessage parsed;
  CATCH_REQUIRE(parsed.ParseFromString(Flatten(buffer)));
  CATCH_CHECK(parsed.gradient().values().empty());
  // Every header field zero: an empty SliceData, as protobuf writes it.
  wire::ServerMessage empty;
  empty.mutable_params();
  CATCH_CHECK(Flatten(EncodeSlice(kParamsField, SliceHeader(), nullptr, 0, nullptr)) ==
              empty.SerializeAsString());
}

CATCH_TEST_CASE("a scale exponent is encoded as protobuf writes sint32, present even when 0") {
  for (int32_t e : {0, 1, -1, 14, -100, 100, INT32_MAX, INT32_MIN}) {
    CATCH_CAPTURE(e);
    SliceHeader h;
    h.slice_id = 9;
    h.iteration = 4;
    h.has_scale_exponent = true;
    h.scale_exponent = e;
    wire::ServerMessage expected;
    expected.mutable_params()->set_slice_id(9);
    expected.mutable_params()->set_iteration(4);
    expected.mutable_params()->set_scale_exponent(e);
    // Without values: field order, byte for byte what protobuf writes.
    CATCH_CHECK(Flatten(EncodeSlice(kParamsField, h, nullptr, 0, nullptr)) ==
                expected.SerializeAsString());
    // With values in a gRPC slice of the caller's: parsed back with the values.
    const std::string values = RandomBytes(13, 7);  // odd: whatever the bytes are
    grpc::ByteBuffer buffer =
        EncodeSlice(kParamsField, h, grpc::Slice(values.data(), values.size()));
    wire::ServerMessage parsed;
    CATCH_REQUIRE(parsed.ParseFromString(Flatten(buffer)));
    CATCH_CHECK(parsed.params().has_scale_exponent());
    CATCH_CHECK(parsed.params().scale_exponent() == e);
    CATCH_CHECK(parsed.params().values() == values);
    DecodedServerMessage d;
    CATCH_REQUIRE(Decode(&buffer, &d).ok());
    CATCH_CHECK(d.header.has_scale_exponent);
    CATCH_CHECK(d.header.scale_exponent == e);
    CATCH_CHECK(Concat(d.values) == values);
  }
  // Absent: not written, and decoded as absent.
  SliceHeader h;
  h.slice_id = 9;
  grpc::ByteBuffer buffer = EncodeSlice(kGradientField, h, grpc::Slice(std::string("ab")));
  DecodedWorkerMessage d;
  CATCH_REQUIRE(Decode(&buffer, &d).ok());
  CATCH_CHECK_FALSE(d.header.has_scale_exponent);
  CATCH_CHECK(d.value_bytes == 2);
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
  grpc::ByteBuffer buffer = EncodeSlice(kParamsField, h, values.data(), values.size(), nullptr);
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
  CATCH_CHECK(d.field == kGradientField);
  CATCH_CHECK(Concat(d.values) == vals_b);
  CheckDecodesLikeProtobuf(OneSlice(worker_inputs[7]), worker_inputs[7], &d);
  CATCH_CHECK(d.header.slice_id == 1);
  CATCH_CHECK(d.header.iteration == 5);
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

CATCH_TEST_CASE("EncodeSlice's value slice is the caller's memory, held until gRPC lets go") {
  auto values = std::make_shared<std::vector<float>>(40000, 1.5f);
  std::weak_ptr<std::vector<float>> watch = values;
  SliceHeader h;
  h.slice_id = 3;
  auto buffer = std::make_unique<grpc::ByteBuffer>(
      EncodeSlice(kGradientField, h, values->data(), values->size() * sizeof(float), values));
  const float* data = values->data();
  values.reset();
  CATCH_CHECK(!watch.expired());  // the slice holds it
  std::vector<grpc::Slice> slices;
  CATCH_REQUIRE(buffer->Dump(&slices).ok());
  CATCH_REQUIRE(slices.size() == 2);
  CATCH_CHECK(reinterpret_cast<const void*>(slices[1].begin()) ==
              reinterpret_cast<const void*>(data));
  CATCH_CHECK(slices[1].size() == 40000 * sizeof(float));
  slices.clear();
  auto copy = std::make_unique<grpc::ByteBuffer>(*buffer);
  buffer.reset();
  CATCH_CHECK(!watch.expired());  // the copy still refers to the slice
  DecodedWorkerMessage d;
  CATCH_REQUIRE(Decode(copy.get(), &d).ok());
  copy.reset();
  CATCH_CHECK(!watch.expired());  // the decoded views keep the slice
  CATCH_CHECK(d.values[0].data() == reinterpret_cast<const char*>(data));
  d.Release();
  CATCH_CHECK(watch.expired());
}

// A localhost server on an OS-chosen port.
struct TestServer {
  explicit TestServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
  }
  ~TestServer() { server->Shutdown(); }
  std::shared_ptr<grpc::Channel> Channel() const {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                               grpc::InsecureChannelCredentials());
  }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// The raw server's behaviour in the stream tests: answers a Hello with a Welcome and every
// gradient with params of the same slice whose values are the gradient's, reversed.
grpc::Status EchoReversed(grpc::ServerContext*, RawTrainServerStream* stream) {
  grpc::ByteBuffer in;
  DecodedWorkerMessage msg;
  while (stream->Read(&in)) {
    const absl::Status s = Decode(&in, &msg);
    if (!s.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
    if (msg.field == kHelloField) {
      wire::ServerMessage welcome;
      welcome.mutable_welcome()->set_server_index(msg.control.hello().server_index());
      stream->Write(EncodeMessage(welcome));
    } else if (msg.field == kGradientField) {
      auto out = std::make_shared<std::string>();
      out->reserve(msg.value_bytes);
      for (absl::string_view part : msg.values) out->append(part.data(), part.size());
      std::reverse(out->begin(), out->end());
      stream->Write(EncodeSlice(kParamsField, msg.header, out->data(), out->size(), out));
    } else if (msg.field == kDoneField) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

std::string Reversed(std::string s) {
  std::reverse(s.begin(), s.end());
  return s;
}

CATCH_TEST_CASE("a raw client and a RawTrainService exchange slices over localhost") {
  RawTrainService service(EchoReversed);
  TestServer server(&service);
  auto channel = server.Channel();
  grpc::ClientContext context;
  std::unique_ptr<RawTrainClientStream> stream = OpenRawTrain(channel.get(), &context);
  wire::WorkerMessage hello;
  hello.mutable_hello()->set_server_index(4);
  CATCH_REQUIRE(stream->Write(EncodeMessage(hello)));
  grpc::ByteBuffer in;
  DecodedServerMessage msg;
  CATCH_REQUIRE(stream->Read(&in));
  CATCH_REQUIRE(Decode(&in, &msg).ok());
  CATCH_CHECK(msg.field == kWelcomeField);
  CATCH_CHECK(msg.control.welcome().server_index() == 4);

  std::vector<std::weak_ptr<std::string>> sent;
  int released_when_write_returned = 0;
  for (int i = 0; i < 4; ++i) {
    auto values = std::make_shared<std::string>(RandomBytes(300000 * 4 + i, 20 + i));
    const std::string expected = Reversed(*values);
    sent.push_back(values);
    SliceHeader h;
    h.slice_id = i;
    h.iteration = 100 + i;
    h.offset = i * 7;
    {
      grpc::ByteBuffer out =
          EncodeSlice(kGradientField, h, values->data(), values->size(), values);
      values.reset();
      CATCH_REQUIRE(stream->Write(out));
    }
    // Not asserted: whether gRPC still holds the slice after a synchronous Write returns.
    if (sent.back().expired()) ++released_when_write_returned;
    CATCH_REQUIRE(stream->Read(&in));
    CATCH_REQUIRE(Decode(&in, &msg).ok());
    CATCH_CHECK(msg.field == kParamsField);
    CATCH_CHECK(msg.header.slice_id == h.slice_id);
    CATCH_CHECK(msg.header.iteration == h.iteration);
    CATCH_CHECK(msg.header.offset == h.offset);
    CATCH_CHECK(Concat(msg.values) == expected);
  }
  std::printf("raw stream: %d of 4 keepalives released by the time Write returned\n",
              released_when_write_returned);
  wire::WorkerMessage done;
  done.mutable_done();
  CATCH_REQUIRE(stream->Write(EncodeMessage(done)));
  stream->WritesDone();
  CATCH_CHECK(!stream->Read(&in));
  CATCH_CHECK(stream->Finish().ok());
  stream.reset();
  for (const auto& w : sent) CATCH_CHECK(w.expired());
}

CATCH_TEST_CASE("the generated typed stub talks to a RawTrainService") {
  RawTrainService service(EchoReversed);
  TestServer server(&service);
  auto stub = wire::ParameterServer::NewStub(server.Channel());
  grpc::ClientContext context;
  auto stream = stub->Train(&context);
  wire::WorkerMessage hello;
  hello.mutable_hello()->set_server_index(2);
  CATCH_REQUIRE(stream->Write(hello));
  wire::ServerMessage reply;
  CATCH_REQUIRE(stream->Read(&reply));
  CATCH_CHECK(reply.welcome().server_index() == 2);
  wire::WorkerMessage grad;
  grad.mutable_gradient()->set_slice_id(11);
  grad.mutable_gradient()->set_iteration(12);
  grad.mutable_gradient()->set_offset(13);
  grad.mutable_gradient()->set_values(RandomBytes(100003, 30));
  CATCH_REQUIRE(stream->Write(grad));
  CATCH_REQUIRE(stream->Read(&reply));
  CATCH_REQUIRE(reply.has_params());
  CATCH_CHECK(reply.params().slice_id() == 11);
  CATCH_CHECK(reply.params().iteration() == 12);
  CATCH_CHECK(reply.params().offset() == 13);
  CATCH_CHECK(reply.params().values() == Reversed(grad.gradient().values()));
  stream->WritesDone();
  CATCH_CHECK(!stream->Read(&reply));
  CATCH_CHECK(stream->Finish().ok());
}

// The generated service, answering like EchoReversed.
class TypedEchoService : public wire::ParameterServer::Service {
  grpc::Status Train(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<wire::ServerMessage, wire::WorkerMessage>* stream) override {
    wire::WorkerMessage in;
    while (stream->Read(&in)) {
      if (!in.has_gradient()) continue;
      wire::ServerMessage out;
      out.mutable_params()->set_slice_id(in.gradient().slice_id());
      out.mutable_params()->set_iteration(in.gradient().iteration());
      out.mutable_params()->set_offset(in.gradient().offset());
      out.mutable_params()->set_shared_count(in.gradient().shared_count());
      out.mutable_params()->set_values(Reversed(in.gradient().values()));
      stream->Write(out);
    }
    return grpc::Status::OK;
  }
};

CATCH_TEST_CASE("a raw client talks to the generated service") {
  TypedEchoService service;
  TestServer server(&service);
  auto channel = server.Channel();
  grpc::ClientContext context;
  // Sent without a keepalive: it must outlive the stream.
  const std::string values = RandomBytes(250001, 40);
  auto stream = OpenRawTrain(channel.get(), &context);
  SliceHeader h;
  h.slice_id = 21;
  h.iteration = 22;
  h.offset = 23;
  CATCH_REQUIRE(stream->Write(EncodeSlice(kGradientField, h, values.data(), values.size(),
                                          nullptr)));
  SliceHeader shared;
  shared.slice_id = 1;
  shared.shared_count = 40000;
  CATCH_REQUIRE(stream->Write(EncodeSlice(kGradientField, shared, nullptr, 0, nullptr)));
  grpc::ByteBuffer in;
  DecodedServerMessage msg;
  CATCH_REQUIRE(stream->Read(&in));
  CATCH_REQUIRE(Decode(&in, &msg).ok());
  CATCH_CHECK(msg.field == kParamsField);
  CATCH_CHECK(msg.header.slice_id == 21);
  CATCH_CHECK(msg.header.iteration == 22);
  CATCH_CHECK(msg.header.offset == 23);
  CATCH_CHECK(Concat(msg.values) == Reversed(values));
  CATCH_REQUIRE(stream->Read(&in));
  CATCH_REQUIRE(Decode(&in, &msg).ok());
  CATCH_CHECK(msg.header.slice_id == 1);
  CATCH_CHECK(msg.header.shared_count == 40000);
  CATCH_CHECK(msg.value_bytes == 0);
  CATCH_CHECK(msg.values.empty());
  stream->WritesDone();
  CATCH_CHECK(!stream->Read(&in));
  CATCH_CHECK(stream->Finish().ok());
}

}  // namespace
}  // namespace p3
