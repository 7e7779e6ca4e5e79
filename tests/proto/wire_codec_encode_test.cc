// The wire codec's encoder (proto/wire_codec.h): EncodeSlice writes what protobuf
// writes, and its value slice is the caller's memory.
#include "proto/wire_codec.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/p3.pb.h"
#include "tests/proto/wire_codec_test_util.h"

namespace p3 {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  CATCH_REQUIRE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

CATCH_TEST_CASE("EncodeSlice output parses with protobuf into the intended message") {
  const std::string values = RandomBytes(4001, 11);  // also an odd byte count
  SliceHeader h;
  h.slice_id = 123456;
  h.set_iteration(1ull << 33);
  h.offset = 99;
  for (int field : {kInit, kGradient}) {
    wire::WorkerMessage parsed;
    CATCH_REQUIRE(parsed.ParseFromString(
        Flatten(EncodeSlice(field, h, values.data(), values.size(), nullptr))));
    CATCH_CHECK(static_cast<int>(parsed.kind_case()) == field);
    const wire::SliceData& s = field == kInit ? parsed.init() : parsed.gradient();
    CATCH_CHECK(s.slice_id() == h.slice_id);
    CATCH_CHECK(s.iteration() == h.iteration());
    CATCH_CHECK(s.offset() == h.offset);
    CATCH_CHECK(s.shared_count() == 0);
    CATCH_CHECK(s.values() == values);
  }
  wire::ServerMessage parsed;
  CATCH_REQUIRE(parsed.ParseFromString(
      Flatten(EncodeSlice(kParams, h, values.data(), values.size(), nullptr))));
  CATCH_REQUIRE(parsed.has_params());
  CATCH_CHECK(parsed.params().slice_id() == h.slice_id);
  CATCH_CHECK(parsed.params().values() == values);
}

CATCH_TEST_CASE("EncodeSlice without values and with a shared_count equals protobuf's bytes") {
  SliceHeader h;
  h.slice_id = 5;
  h.set_iteration(7);
  h.offset = 40000;
  h.shared_count = 40000;
  const grpc::ByteBuffer buffer = EncodeSlice(kGradient, h, nullptr, 0, nullptr);
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
  CATCH_CHECK(Flatten(EncodeSlice(kParams, SliceHeader(), nullptr, 0, nullptr)) ==
              empty.SerializeAsString());
}

CATCH_TEST_CASE("a scale exponent is encoded as protobuf writes sint32, present even when 0") {
  for (int32_t e : {0, 1, -1, 14, -100, 100, INT32_MAX, INT32_MIN}) {
    CATCH_CAPTURE(e);
    SliceHeader h;
    h.slice_id = 9;
    h.set_version(4);
    h.has_scale_exponent = true;
    h.scale_exponent = e;
    wire::ServerMessage expected;
    expected.mutable_params()->set_slice_id(9);
    expected.mutable_params()->set_iteration(4);
    expected.mutable_params()->set_scale_exponent(e);
    // Without values: field order, byte for byte what protobuf writes.
    CATCH_CHECK(Flatten(EncodeSlice(kParams, h, nullptr, 0, nullptr)) ==
                expected.SerializeAsString());
    // With values in a gRPC slice of the caller's: parsed back with the values.
    const std::string values = RandomBytes(13, 7);  // odd: whatever the bytes are
    grpc::ByteBuffer buffer =
        EncodeSlice(kParams, h, grpc::Slice(values.data(), values.size()));
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
  grpc::ByteBuffer buffer = EncodeSlice(kGradient, h, grpc::Slice(std::string("ab")));
  DecodedWorkerMessage d;
  CATCH_REQUIRE(Decode(&buffer, &d).ok());
  CATCH_CHECK_FALSE(d.header.has_scale_exponent);
  CATCH_CHECK(d.value_bytes == 2);
}

CATCH_TEST_CASE("a gradient's iteration and a params' version are SliceData.iteration") {
  // Up: the iteration of the gradient.
  SliceHeader up;
  up.slice_id = 2;
  up.set_iteration(41);
  CATCH_CHECK(up.iteration() == 41);
  wire::WorkerMessage gradient;
  CATCH_REQUIRE(gradient.ParseFromString(Flatten(EncodeSlice(kGradient, up, nullptr, 0, nullptr))));
  CATCH_CHECK(gradient.gradient().iteration() == 41);
  // Down: the version of the values, in the same field.
  SliceHeader down;
  down.slice_id = 2;
  down.set_version(42);
  CATCH_CHECK(down.version() == 42);
  grpc::ByteBuffer buffer = EncodeSlice(kParams, down, nullptr, 0, nullptr);
  wire::ServerMessage params;
  CATCH_REQUIRE(params.ParseFromString(Flatten(buffer)));
  CATCH_CHECK(params.params().iteration() == 42);
  DecodedServerMessage d;
  CATCH_REQUIRE(Decode(&buffer, &d).ok());
  CATCH_CHECK(d.header.version() == 42);
  // A header parsed by protobuf maps the same way.
  CATCH_CHECK(HeaderOf(params.params()).version() == 42);
  CATCH_CHECK(HeaderOf(gradient.gradient()).iteration() == 41);
}

CATCH_TEST_CASE("EncodeSlice's value slice is the caller's memory, held until gRPC lets go") {
  auto values = std::make_shared<std::vector<float>>(40000, 1.5f);
  std::weak_ptr<std::vector<float>> watch = values;
  SliceHeader h;
  h.slice_id = 3;
  auto buffer = std::make_unique<grpc::ByteBuffer>(
      EncodeSlice(kGradient, h, values->data(), values->size() * sizeof(float), values));
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

}  // namespace
}  // namespace p3
