// The server's protobuf edge, driven directly: messages whose values are in a worker's
// shared memory, and the hostile forms of them; a rejoining worker's Hello and Resume.
#include "server/message_handler.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "p3/core/wire_dtype.h"
#include "proto/wire.h"
#include "proto/wire_codec.h"

namespace p3 {
namespace {

// One tensor "w" of 5 values, slices of 3: slice 0 = [0,3), slice 1 = [3,5). One server,
// one worker, plain SGD with lr 1.
struct Fixture {
  Fixture() : shard(Options()) {
    ClusterSignature sig;
    sig.num_workers = 1;
    sig.num_servers = 1;
    sig.tensors = {{"w", {5}, "float32"}};
    sig.plan.granularity = Granularity::kSliced;
    sig.plan.slice_params = 3;
    CATCH_REQUIRE(shard.Join(sig, 0).ok());
    plan = *shard.plan();
    shared = SharedValues{.params = params.data(), .grads = grads.data()};
  }
  static ShardOptions Options() {
    ShardOptions o;
    o.optimizer.lr = 1.0;
    o.optimizer.momentum = 0;
    return o;
  }
  // A slice message naming `count` values at `offset` in shared memory.
  static wire::WorkerMessage Shared(bool init, uint32_t slice, uint64_t offset, uint64_t count) {
    wire::WorkerMessage msg;
    wire::SliceData* d = init ? msg.mutable_init() : msg.mutable_gradient();
    d->set_slice_id(slice);
    d->set_offset(offset);
    d->set_shared_count(count);
    return msg;
  }
  absl::Status Handle(const wire::WorkerMessage& msg, const SharedValues* with) {
    return HandleWorkerMessage(&shard, 0, msg, &handled, with);
  }

  ParameterShard shard;
  SlicePlan plan = *SlicePlan::Create({{"w", 5}}, {});
  std::vector<float> params = {1, 2, 3, 4, 5};
  std::vector<float> grads = {10, 20, 30, 40, 50};
  SharedValues shared;
  Handled handled;
};

// The WorkerMessage members that carry a SliceData.
constexpr int kInit = wire::WorkerMessage::kInitFieldNumber;
constexpr int kGradient = wire::WorkerMessage::kGradientFieldNumber;

bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

CATCH_TEST_CASE("init and gradient values are read from the worker's shared memory") {
  Fixture f;
  // Initial values past the slice's end are refused as a gradient's are.
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(true, 1, 1, 2), &f.shared),
                       "initial values of slice 1: 2 values at offset 1 do not fit the slice's 2"));
  CATCH_REQUIRE(f.Handle(Fixture::Shared(true, 0, 0, 3), &f.shared).ok());
  CATCH_REQUIRE(f.Handle(Fixture::Shared(true, 1, 0, 2), &f.shared).ok());
  CATCH_REQUIRE(f.handled.out.size() == 2);  // version 0 of both slices goes out
  CATCH_CHECK(DecodedValues(f.handled.out[1].message) == std::vector<float>{4, 5});
  // Gradient of slice 1 in two parts: [3,4) then [4,5) of the gradient buffer.
  CATCH_REQUIRE(f.Handle(Fixture::Shared(false, 1, 0, 1), &f.shared).ok());
  CATCH_CHECK(f.handled.out.empty());
  CATCH_REQUIRE(f.Handle(Fixture::Shared(false, 1, 1, 1), &f.shared).ok());
  CATCH_REQUIRE(f.handled.out.size() == 1);
  CATCH_CHECK(DecodedValues(f.handled.out[0].message) == std::vector<float>{4 - 40, 5 - 50});
}

CATCH_TEST_CASE("a shared-memory message that does not fit is refused and changes nothing") {
  Fixture f;
  CATCH_REQUIRE(f.Handle(Fixture::Shared(true, 0, 0, 3), &f.shared).ok());
  CATCH_REQUIRE(f.Handle(Fixture::Shared(true, 1, 0, 2), &f.shared).ok());
  // No shared memory set up on this stream.
  absl::Status none = f.Handle(Fixture::Shared(false, 0, 0, 3), nullptr);
  CATCH_CHECK(absl::IsInvalidArgument(none));
  CATCH_CHECK(Mentions(none, "did not set up"));
  // Values both in the message and in shared memory.
  wire::WorkerMessage both = Fixture::Shared(false, 0, 0, 3);
  both.mutable_gradient()->set_values(std::string(12, '\0'));
  CATCH_CHECK(Mentions(f.Handle(both, &f.shared), "both in the message and in shared memory"));
  // Past the end of the slice, by count or by offset, including overflowing sums: the
  // shard's one check of a part against its slice, before any address is formed.
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 0, 0, 4), &f.shared),
                       "4 values at offset 0 do not fit the slice's 3"));
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 0, 2, 2), &f.shared),
                       "2 values at offset 2 do not fit the slice's 3"));
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 0, UINT64_MAX - 1, 2), &f.shared),
                       "out of range"));
  CATCH_CHECK(
      Mentions(f.Handle(Fixture::Shared(false, 0, 1, UINT64_MAX), &f.shared), "out of range"));
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 0, 1, INT64_MAX), &f.shared),
                       "do not fit the slice's 3"));
  // A slice the plan does not have.
  CATCH_CHECK(Mentions(f.Handle(Fixture::Shared(false, 7, 0, 1), &f.shared),
                       "gradient for unknown slice 7; the plan has 2 slices"));
  // Nothing was aggregated: the whole gradient still completes the update.
  CATCH_REQUIRE(f.Handle(Fixture::Shared(false, 0, 0, 3), &f.shared).ok());
  CATCH_REQUIRE(f.handled.out.size() == 1);
  CATCH_CHECK(DecodedValues(f.handled.out[0].message) ==
              std::vector<float>{1 - 10, 2 - 20, 3 - 30});
}

CATCH_TEST_CASE("a worker's buffers come back as their mean; malformed ones are refused") {
  Fixture f;  // one worker: the mean of one contribution is itself
  wire::WorkerMessage msg;
  const std::vector<float> values = {0.5f, 2.0f};
  msg.mutable_buffers()->set_round(0);
  msg.mutable_buffers()->set_values(values.data(), values.size() * sizeof(float));
  // Not a whole number of float32.
  wire::WorkerMessage odd = msg;
  odd.mutable_buffers()->mutable_values()->push_back('x');
  absl::Status refused = f.Handle(odd, nullptr);
  CATCH_CHECK(absl::IsInvalidArgument(refused));
  CATCH_CHECK(Mentions(refused, "whole number of float32"));
  // The right one, after the refusal.
  msg.mutable_buffers()->set_round(3);
  CATCH_REQUIRE(f.Handle(msg, nullptr).ok());
  CATCH_REQUIRE(f.handled.out.size() == 1);
  CATCH_CHECK(f.handled.out[0].message.kind == Downstream::Kind::kBuffers);
  CATCH_CHECK(f.handled.out[0].message.round == 3);
  CATCH_CHECK(*f.handled.out[0].message.buffers == values);
  // A round before the one completed.
  wire::WorkerMessage earlier = msg;
  earlier.mutable_buffers()->set_round(2);
  CATCH_CHECK(Mentions(f.Handle(earlier, nullptr), "round 3 has completed"));
}

CATCH_TEST_CASE("buffers sent to a server other than server 0 are refused") {
  ShardOptions o;
  o.server_index = 1;
  ParameterShard shard(o);
  const float v = 1.0f;
  absl::StatusOr<std::vector<ToWorker>> out = shard.Buffers(0, 0, &v, 1);
  CATCH_CHECK(absl::IsInvalidArgument(out.status()));
  CATCH_CHECK(Mentions(out.status(), "not server 0"));
}

CATCH_TEST_CASE("a Reached reaches the shard: a server without slices checkpoints by it") {
  ShardOptions o;
  o.server_index = 1;  // "w" is one slice, server 0's
  o.checkpoint_every = 2;
  std::vector<uint64_t> saved;
  o.on_checkpoint = [&saved](ShardCheckpoint c) { saved.push_back(c.iteration); };
  ParameterShard shard(o);
  ClusterSignature sig;
  sig.num_servers = 2;
  sig.tensors = {{"w", {5}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = 5;
  CATCH_REQUIRE(shard.Join(sig, 0).ok());
  wire::WorkerMessage msg;
  msg.mutable_reached()->set_version(2);
  Handled handled;
  CATCH_REQUIRE(HandleWorkerMessage(&shard, 0, msg, &handled, nullptr).ok());
  CATCH_CHECK(handled.out.empty());
  CATCH_CHECK(saved == std::vector<uint64_t>{2});
}

CATCH_TEST_CASE("a Hello with rejoin is taken as a rejoin, and the Resume hands out the values") {
  ShardOptions options = Fixture::Options();
  options.num_workers = 1;
  ClusterSignature sig;
  sig.num_workers = 1;
  sig.num_servers = 1;
  sig.tensors = {{"w", {5}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = 3;
  wire::Hello hello;
  SignatureToHello(sig, &hello);
  hello.set_protocol_version(kProtocolVersion);
  hello.set_rank(0);
  hello.set_rejoin(true);

  // Rejoins off (the default): refused, naming the setting.
  ParameterShard off(options);
  CATCH_REQUIRE(off.Join(sig, 0).ok());
  absl::StatusOr<HelloResult> refused = HandleHello(&off, hello, 0);
  CATCH_CHECK(absl::IsFailedPrecondition(refused.status()));
  CATCH_CHECK(Mentions(refused.status(), "cluster.rejoin_timeout_s"));

  options.accept_rejoin = true;
  ParameterShard shard(options);
  CATCH_REQUIRE(shard.Join(sig, 0).ok());
  std::vector<float> w = {1, 2, 3, 4, 5};
  CATCH_REQUIRE(shard.Init(0, 0, w.data(), 3).ok());
  CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
  absl::StatusOr<HelloResult> joined = HandleHello(&shard, hello, 0);
  CATCH_REQUIRE(joined.ok());
  CATCH_CHECK(joined->rejoined);
  CATCH_CHECK(joined->current_version == 0);
  CATCH_CHECK(joined->out.empty());  // the values come with the Resume

  Handled handled;
  wire::WorkerMessage gradient;
  gradient.mutable_gradient()->set_slice_id(0);
  gradient.mutable_gradient()->set_values(std::string(12, '\0'));
  CATCH_CHECK(absl::IsFailedPrecondition(HandleWorkerMessage(&shard, 0, gradient, &handled)));
  wire::WorkerMessage resume;
  resume.mutable_resume()->set_version(0);
  CATCH_REQUIRE(HandleWorkerMessage(&shard, 0, resume, &handled).ok());
  CATCH_REQUIRE(handled.out.size() == 2);
  CATCH_CHECK(DecodedValues(handled.out[1].message) == std::vector<float>{4, 5});
  CATCH_CHECK(HandleWorkerMessage(&shard, 0, gradient, &handled).ok());
}

// --- The 16-bit wire: the same one-tensor shard on a bfloat16 or float16 stream.
struct WireFixture {
  explicit WireFixture(WireDType dtype) : dtype(dtype), shard(Options(dtype)) {
    ClusterSignature sig;
    sig.tensors = {{"w", {5}, "float32"}};
    sig.plan.granularity = Granularity::kSliced;
    sig.plan.slice_params = 3;
    sig.wire_dtype = dtype;
    CATCH_REQUIRE(shard.Join(sig, 0).ok());
    plan = *shard.plan();
    shared = SharedValues{.params = params.data(), .grads = grads.data()};
    // Initial values: float32 on every stream.
    for (uint32_t slice : {0u, 1u}) {
      const Slice& s = plan.slices()[slice];
      CATCH_REQUIRE(Handle(Message(kInit, slice, 0, params.data() + s.offset,
                                   s.length * 4, std::nullopt))
                        .ok());
    }
  }
  static ShardOptions Options(WireDType dtype) {
    ShardOptions o;
    o.optimizer.lr = 1.0;
    o.optimizer.momentum = 0;
    o.wire_dtype = dtype;
    return o;
  }
  // A slice message as it arrives from the raw stream: `bytes` of raw values.
  static DecodedWorkerMessage Message(int field, uint32_t slice, uint64_t iteration,
                                     const void* values, size_t bytes,
                                     std::optional<int> scale) {
    SliceHeader h;
    h.slice_id = slice;
    h.set_iteration(iteration);
    h.has_scale_exponent = scale.has_value();
    h.scale_exponent = scale.value_or(0);
    grpc::ByteBuffer buffer =
        EncodeSlice(field, h, grpc::Slice(static_cast<const char*>(values), bytes));
    DecodedWorkerMessage d;
    CATCH_REQUIRE(Decode(&buffer, &d).ok());
    return d;
  }
  // Slice `slice` of `values`, encoded as a worker of this stream sends its gradient.
  DecodedWorkerMessage Gradient(uint32_t slice, const std::vector<float>& values) {
    const Slice& s = plan.slices()[slice];
    const float* from = values.data() + s.offset;
    std::optional<int> scale;
    if (dtype == WireDType::kFloat16) scale = Float16ScaleExponent(from, s.length);
    std::string bytes(s.length * BytesPerValue(dtype), '\0');
    EncodeValues(dtype, from, s.length, scale.value_or(0), bytes.data());
    return Message(kGradient, slice, 0, bytes.data(), bytes.size(), scale);
  }
  absl::Status Handle(const DecodedWorkerMessage& msg, const SharedValues* with = nullptr) {
    return HandleWorkerMessage(&shard, 0, msg, &handled, with);
  }
  // What the worker would hold after the wire: slice by slice, rounded as the sender does.
  std::vector<float> Rounded(const std::vector<float>& values) const {
    std::vector<float> out(values.size());
    for (const Slice& s : plan.slices()) {
      const int e = dtype == WireDType::kFloat16
                        ? Float16ScaleExponent(values.data() + s.offset, s.length)
                        : 0;
      RoundToWire(dtype, values.data() + s.offset, s.length, e, out.data() + s.offset);
    }
    return out;
  }

  const WireDType dtype;
  ParameterShard shard;
  SlicePlan plan = *SlicePlan::Create({{"w", 5}}, {});
  // Values that 16 bits cannot all hold exactly.
  std::vector<float> params = {1.001f, -2.7183f, 3.14159f, 1e-3f, 65519.0f};
  std::vector<float> grads = {0.1f, -0.033f, 1e-6f, 7.77f, 123.456f};
  SharedValues shared;
  Handled handled;
};

CATCH_TEST_CASE("16-bit gradients are summed in float32 and the new values go down encoded") {
  for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    WireFixture f(dtype);
    const std::vector<float> rounded_grads = f.Rounded(f.grads);
    CATCH_REQUIRE(rounded_grads != f.grads);  // the rounding is visible
    for (uint32_t slice : {0u, 1u}) {
      CATCH_REQUIRE(f.Handle(f.Gradient(slice, f.grads)).ok());
      CATCH_REQUIRE(f.handled.out.size() == 1);
      const Downstream& o = f.handled.out[0].message;
      CATCH_REQUIRE(o.values != nullptr);
      CATCH_CHECK(o.values->dtype() == dtype);
      const Slice& s = f.plan.slices()[slice];
      CATCH_CHECK(o.values->size() == s.length);
      CATCH_CHECK(o.values->bytes().size() == static_cast<size_t>(2 * s.length));
      // The master values: float32, updated with the decoded (rounded) gradient.
      absl::StatusOr<std::pair<std::vector<float>, uint64_t>> master = f.shard.SliceValues(slice);
      CATCH_REQUIRE(master.ok());
      std::vector<float> want_master;
      for (int64_t i = s.offset; i < s.offset + s.length; ++i) {
        want_master.push_back(f.params[i] - rounded_grads[i]);
      }
      CATCH_CHECK(master->first == want_master);
      CATCH_CHECK(master->second == 1);
      // Down: the master values rounded to the wire, with the slice's own scale.
      std::vector<float> want_down(want_master.size());
      const int e = dtype == WireDType::kFloat16
                        ? Float16ScaleExponent(want_master.data(), s.length)
                        : 0;
      CATCH_CHECK(o.values->scale_exponent().value_or(0) == e);
      CATCH_CHECK(o.values->scale_exponent().has_value() == (dtype == WireDType::kFloat16));
      RoundToWire(dtype, want_master.data(), s.length, e, want_down.data());
      CATCH_CHECK(DecodedValues(o) == want_down);
      CATCH_CHECK(want_down != want_master);
    }
  }
}

CATCH_TEST_CASE("gradients in shared memory are rounded as the wire rounds them") {
  for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    WireFixture over_stream(dtype);
    WireFixture shared(dtype);
    CATCH_REQUIRE(over_stream.Handle(over_stream.Gradient(0, over_stream.grads)).ok());
    // The same gradient named in shared memory, with the scale its sender chose.
    SliceHeader h;
    h.slice_id = 0;
    h.shared_count = 3;
    if (dtype == WireDType::kFloat16) {
      h.has_scale_exponent = true;
      h.scale_exponent = Float16ScaleExponent(shared.grads.data(), 3);
    }
    grpc::ByteBuffer buffer = EncodeSlice(kGradient, h, nullptr, 0, nullptr);
    DecodedWorkerMessage d;
    CATCH_REQUIRE(Decode(&buffer, &d).ok());
    CATCH_REQUIRE(shared.Handle(d, &shared.shared).ok());
    CATCH_CHECK(shared.shard.SliceValues(0)->first == over_stream.shard.SliceValues(0)->first);
  }
}

CATCH_TEST_CASE("malformed 16-bit payloads are refused naming the slice, changing nothing") {
  for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    WireFixture f(dtype);
    const bool half = dtype == WireDType::kFloat16;
    const std::optional<int> scale = half ? std::optional<int>(3) : std::nullopt;
    const std::string name = WireDTypeName(dtype);
    auto refused = [&](const DecodedWorkerMessage& msg, const std::string& text) {
      const absl::Status s = f.Handle(msg);
      CATCH_CAPTURE(s.ToString(), text);
      CATCH_CHECK(absl::IsInvalidArgument(s));
      CATCH_CHECK(Mentions(s, "slice 0"));
      CATCH_CHECK(Mentions(s, text));
    };
    const std::string zeros(64, '\0');
    // An odd byte count.
    refused(WireFixture::Message(kGradient, 0, 0, zeros.data(), 5, scale),
            "5 bytes, not a whole number of " + name + " values (2 bytes each)");
    // A whole number of 2-byte values that does not fit the slice (4 > 3 values).
    refused(WireFixture::Message(kGradient, 0, 0, zeros.data(), 8, scale),
            "do not fit the slice's 3");
    // A float32 payload of the slice (12 bytes) read as 6 values: does not fit either.
    refused(WireFixture::Message(kGradient, 0, 0, zeros.data(), 12, scale),
            "6 values at offset 0 do not fit");
    if (half) {
      // float16 without its scale, and with one out of range.
      refused(WireFixture::Message(kGradient, 0, 0, zeros.data(), 6, std::nullopt),
              "no scale_exponent on a float16 stream");
      refused(WireFixture::Message(kGradient, 0, 0, zeros.data(), 6, 101),
              "scale_exponent 101 is out of range; allowed -100..100");
    } else {
      // A float16 message (with a scale) on a bfloat16 stream.
      refused(WireFixture::Message(kGradient, 0, 0, zeros.data(), 6, 0),
              "a scale_exponent on a bfloat16 stream");
    }
    // Initial values are float32: a scale on them is refused too.
    refused(WireFixture::Message(kInit, 0, 0, zeros.data(), 12, 0),
            "initial values of slice 0 (always float32): a scale_exponent on a float32 stream");
    // Nothing was stored: the slice is still at version 0 with its initial values, and
    // one good gradient completes the update alone.
    CATCH_CHECK(f.shard.SliceValues(0)->second == 0);
    CATCH_REQUIRE(f.Handle(f.Gradient(0, f.grads)).ok());
    CATCH_REQUIRE(f.handled.out.size() == 1);
    CATCH_CHECK(f.shard.SliceValues(0)->second == 1);
  }
}

CATCH_TEST_CASE("on a float32 stream a scale, or a 16-bit payload that shows, is refused") {
  WireFixture f(WireDType::kFloat32);
  const std::string zeros(64, '\0');
  // A bfloat16 gradient of slice 0 (3 values, 6 bytes) is not a whole number of float32.
  absl::Status s = f.Handle(WireFixture::Message(kGradient, 0, 0, zeros.data(), 6, {}));
  CATCH_CHECK(absl::IsInvalidArgument(s));
  CATCH_CHECK(Mentions(s, "gradient of slice 0: 6 bytes, not a whole number of float32 values"));
  // A float16 gradient, recognisable by its scale.
  s = f.Handle(WireFixture::Message(kGradient, 0, 0, zeros.data(), 12, 5));
  CATCH_CHECK(Mentions(s, "gradient of slice 0: a scale_exponent on a float32 stream"));
  // The same through the protobuf path (fuzzer, unusual encodings).
  wire::WorkerMessage msg;
  msg.mutable_gradient()->set_slice_id(1);
  msg.mutable_gradient()->set_scale_exponent(0);
  msg.mutable_gradient()->set_values(std::string(8, '\0'));
  s = HandleWorkerMessage(&f.shard, 0, msg, &f.handled, nullptr);
  CATCH_CHECK(Mentions(s, "gradient of slice 1: a scale_exponent on a float32 stream"));
  CATCH_CHECK(f.shard.SliceValues(1)->second == 0);
}

CATCH_TEST_CASE("a worker whose wire dtype is not the server's is refused at the Hello") {
  ParameterShard shard(WireFixture::Options(WireDType::kBFloat16));
  ClusterSignature sig;
  sig.tensors = {{"w", {5}, "float32"}};
  sig.wire_dtype = WireDType::kFloat16;
  absl::StatusOr<std::vector<ToWorker>> joined = shard.Join(sig, 0);
  CATCH_CHECK(absl::IsFailedPrecondition(joined.status()));
  CATCH_CHECK(Mentions(joined.status(), "worker 0 uses scheduling.wire_dtype float16; this "
                                        "server is configured for bfloat16"));
  CATCH_CHECK_FALSE(shard.plan().has_value());
}

}  // namespace
}  // namespace p3
