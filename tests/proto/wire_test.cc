#include "proto/wire.h"

#include <grpc/grpc.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace p3 {
namespace {

ClusterSignature ExampleSignature() {
  ClusterSignature sig;
  sig.num_workers = 3;
  sig.num_servers = 2;
  sig.tensors = {{"conv1/0", {8, 3, 3, 3}, "float32"}, {"fc/1", {10}, "float32"}};
  sig.plan.granularity = Granularity::kTensor;
  sig.plan.slice_params = 123;
  sig.plan.split_threshold = 4567;
  sig.plan.num_servers = 2;
  sig.values_on_push = false;
  sig.priority = true;
  return sig;
}

wire::Hello HelloOf(const ClusterSignature& sig) {
  wire::Hello hello;
  SignatureToHello(sig, &hello);
  return hello;
}

bool Names(const absl::Status& s, const std::string& field) {
  return std::string(s.message()).find(field) != std::string::npos;
}

CATCH_TEST_CASE("a signature sent in a Hello comes back the same") {
  for (Granularity granularity : {Granularity::kSliced, Granularity::kTensor}) {
    for (bool flags : {false, true}) {
      ClusterSignature sig = ExampleSignature();
      sig.plan.granularity = granularity;
      sig.values_on_push = flags;
      sig.priority = !flags;
      const wire::Hello hello = HelloOf(sig);
      CATCH_CHECK(hello.protocol_version() == 2);  // float32: what version-2 servers speak
      absl::StatusOr<ClusterSignature> back = SignatureFromHello(hello);
      CATCH_REQUIRE(back.ok());
      CATCH_CHECK(DescribeDifference(*back, sig).empty());
      // DescribeDifference skips nothing that travels: compare field by field as well.
      CATCH_CHECK(back->num_workers == sig.num_workers);
      CATCH_CHECK(back->num_servers == sig.num_servers);
      CATCH_CHECK(back->tensors == sig.tensors);
      CATCH_CHECK(back->plan.granularity == sig.plan.granularity);
      CATCH_CHECK(back->plan.slice_params == sig.plan.slice_params);
      CATCH_CHECK(back->plan.split_threshold == sig.plan.split_threshold);
      CATCH_CHECK(back->plan.num_servers == sig.num_servers);
      CATCH_CHECK(back->values_on_push == sig.values_on_push);
      CATCH_CHECK(back->priority == sig.priority);
      CATCH_CHECK(back->wire_dtype == WireDType::kFloat32);
    }
  }
}

CATCH_TEST_CASE("a 16-bit wire dtype travels in the Hello, announced as protocol version 3") {
  for (WireDType dtype : {WireDType::kBFloat16, WireDType::kFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    ClusterSignature sig = ExampleSignature();
    sig.wire_dtype = dtype;
    wire::Hello parsed;
    CATCH_REQUIRE(parsed.ParseFromString(HelloOf(sig).SerializeAsString()));
    CATCH_CHECK(parsed.protocol_version() == 3);
    absl::StatusOr<ClusterSignature> back = SignatureFromHello(parsed);
    CATCH_REQUIRE(back.ok());
    CATCH_CHECK(back->wire_dtype == dtype);
    CATCH_CHECK(DescribeDifference(*back, sig).empty());
    // Another worker's float32 is a difference that names the field.
    ClusterSignature other = sig;
    other.wire_dtype = WireDType::kFloat32;
    CATCH_CHECK(Names(absl::InvalidArgumentError(DescribeDifference(other, sig)),
                      "scheduling.wire_dtype is float32, expected "));
  }
}

CATCH_TEST_CASE("a version-2 Hello means float32; with a 16-bit dtype it is refused") {
  // A worker of before the 16-bit wire: version 2, no field 14.
  wire::Hello old = HelloOf(ExampleSignature());
  old.set_protocol_version(2);
  old.clear_wire_dtype();
  absl::StatusOr<ClusterSignature> sig = SignatureFromHello(old);
  CATCH_REQUIRE(sig.ok());
  CATCH_CHECK(sig->wire_dtype == WireDType::kFloat32);
  old.set_wire_dtype(wire::WIRE_BFLOAT16);
  absl::Status s = SignatureFromHello(old).status();
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Names(s, "hello.wire_dtype: bfloat16 needs protocol version 3"));
  old.set_protocol_version(3);
  old.set_wire_dtype(static_cast<wire::WireDType>(7));
  s = SignatureFromHello(old).status();
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Names(s, "hello.wire_dtype: unknown value 7"));
}

CATCH_TEST_CASE("ownership stripes travel in the Hello as protocol version 4; older Hellos cannot have them") {
  ClusterSignature sig = ExampleSignature();
  sig.plan.owner_params = 80000;
  wire::Hello parsed;
  CATCH_REQUIRE(parsed.ParseFromString(HelloOf(sig).SerializeAsString()));
  CATCH_CHECK(parsed.protocol_version() == 4);
  absl::StatusOr<ClusterSignature> back = SignatureFromHello(parsed);
  CATCH_REQUIRE(back.ok());
  CATCH_CHECK(back->plan.owner_params == 80000);
  CATCH_CHECK(DescribeDifference(*back, sig).empty());
  // A worker without stripes plans differently: named as a difference.
  ClusterSignature other = sig;
  other.plan.owner_params = 0;
  CATCH_CHECK(Names(absl::InvalidArgumentError(DescribeDifference(other, sig)), "owner 0"));
  // Stripes in a Hello that claims version 3 (a server of version 3 would ignore them).
  parsed.set_protocol_version(3);
  absl::Status s = SignatureFromHello(parsed).status();
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Names(s, "hello.plan.owner_params: ownership stripes need protocol version 4"));
  parsed.set_protocol_version(4);
  parsed.mutable_plan()->set_owner_params(-1);
  CATCH_CHECK(Names(SignatureFromHello(parsed).status(), "hello.plan.owner_params: -1"));
}

CATCH_TEST_CASE("packs travel in the Hello as protocol version 5; older Hellos cannot have them") {
  ClusterSignature sig = ExampleSignature();
  sig.plan.owner_params = 80000;
  sig.plan.pack_params = 65536;
  wire::Hello parsed;
  CATCH_REQUIRE(parsed.ParseFromString(HelloOf(sig).SerializeAsString()));
  CATCH_CHECK(parsed.protocol_version() == 5);
  absl::StatusOr<ClusterSignature> back = SignatureFromHello(parsed);
  CATCH_REQUIRE(back.ok());
  CATCH_CHECK(back->plan.pack_params == 65536);
  CATCH_CHECK(DescribeDifference(*back, sig).empty());
  // A worker without packs plans differently: named as a difference.
  ClusterSignature other = sig;
  other.plan.pack_params = 0;
  CATCH_CHECK(Names(absl::InvalidArgumentError(DescribeDifference(other, sig)), "pack 0"));
  // Packs in a Hello that claims version 4 (a server of version 4 would ignore them).
  parsed.set_protocol_version(4);
  absl::Status s = SignatureFromHello(parsed).status();
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Names(s, "hello.plan.pack_params: packs need protocol version 5"));
  parsed.set_protocol_version(5);
  parsed.mutable_plan()->set_pack_params(-1);
  CATCH_CHECK(Names(SignatureFromHello(parsed).status(), "hello.plan.pack_params: -1"));
}

CATCH_TEST_CASE("a signature survives serialisation of its Hello") {
  const ClusterSignature sig = ExampleSignature();
  wire::Hello parsed;
  CATCH_REQUIRE(parsed.ParseFromString(HelloOf(sig).SerializeAsString()));
  absl::StatusOr<ClusterSignature> back = SignatureFromHello(parsed);
  CATCH_REQUIRE(back.ok());
  CATCH_CHECK(DescribeDifference(*back, sig).empty());
}

// The message of SignatureFromHello's error for a Hello changed by `edit`.
template <typename Edit>
absl::Status RefusalOf(Edit edit) {
  wire::Hello hello = HelloOf(ExampleSignature());
  edit(&hello);
  absl::StatusOr<ClusterSignature> sig = SignatureFromHello(hello);
  return sig.ok() ? absl::OkStatus() : sig.status();
}

CATCH_TEST_CASE("a malformed Hello is refused naming the bad field") {
  absl::Status s = RefusalOf([](wire::Hello* h) { h->set_protocol_version(kProtocolVersion + 1); });
  CATCH_CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(Names(s, "hello.protocol_version"));
  s = RefusalOf([](wire::Hello* h) { h->set_protocol_version(kMinProtocolVersion - 1); });
  CATCH_CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(Names(s, "this server speaks 2 to 5"));

  s = RefusalOf([](wire::Hello* h) { h->set_num_workers(0); });
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Names(s, "hello.num_workers"));

  s = RefusalOf([](wire::Hello* h) { h->set_num_servers(0); });
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Names(s, "hello.num_servers"));

  s = RefusalOf([](wire::Hello* h) { h->mutable_tensors(1)->set_dtype(wire::DTYPE_UNSPECIFIED); });
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Names(s, "hello.tensors[\"fc/1\"].dtype"));

  s = RefusalOf([](wire::Hello* h) { h->mutable_plan()->set_granularity("layer"); });
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Names(s, "hello.plan.granularity"));
  CATCH_CHECK(Names(s, "\"layer\""));

  s = RefusalOf([](wire::Hello* h) { h->Clear(); });
  CATCH_CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
}

CATCH_TEST_CASE("every status code crosses the wire unchanged, with its message") {
  CATCH_CHECK(ToGrpcStatus(absl::OkStatus()).ok());
  CATCH_CHECK(FromGrpcStatus(grpc::Status::OK).ok());
  const std::map<absl::StatusCode, grpc::StatusCode> codes = {
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& [absl_code, grpc_code] : codes) {
    CATCH_CAPTURE(absl::StatusCodeToString(absl_code));
    const absl::Status original(absl_code, "worker 2: something went wrong");
    const grpc::Status sent = ToGrpcStatus(original);
    CATCH_CHECK(sent.error_code() == grpc_code);
    CATCH_CHECK(sent.error_message() == "worker 2: something went wrong");
    CATCH_CHECK(FromGrpcStatus(sent) == original);
  }
}

CATCH_TEST_CASE("keepalive pings every half peer_timeout and waits a whole one, at least 1 s") {
  KeepaliveSettings k = KeepaliveFor(absl::Seconds(60));
  CATCH_CHECK(k.time_ms == 30000);
  CATCH_CHECK(k.timeout_ms == 60000);
  CATCH_CHECK(k.min_recv_ping_interval_ms <= k.time_ms);

  k = KeepaliveFor(absl::Milliseconds(100));
  CATCH_CHECK(k.time_ms == 500);
  CATCH_CHECK(k.timeout_ms == 1000);
  // Never closer together than the other side accepts, whatever the timeout.
  CATCH_CHECK(k.min_recv_ping_interval_ms <= k.time_ms);

  k = KeepaliveFor(absl::InfiniteDuration());
  CATCH_CHECK(k.timeout_ms > 0);
  CATCH_CHECK(k.time_ms > 0);
}

CATCH_TEST_CASE("the channel arguments carry the keepalive settings both sides use") {
  const KeepaliveSettings k = KeepaliveFor(absl::Seconds(10));
  std::map<std::string, int> args;
  for (const auto& [name, value] : KeepaliveChannelArgs(absl::Seconds(10))) args[name] = value;
  CATCH_CHECK(args.at(GRPC_ARG_KEEPALIVE_TIME_MS) == k.time_ms);
  CATCH_CHECK(args.at(GRPC_ARG_KEEPALIVE_TIMEOUT_MS) == k.timeout_ms);
  CATCH_CHECK(args.at(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS) == 1);
  CATCH_CHECK(args.at(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS) ==
              k.min_recv_ping_interval_ms);

  const grpc::ChannelArguments arguments = ChannelArgs(absl::Seconds(10));
  const grpc_channel_args channel = arguments.c_channel_args();  // points into `arguments`
  std::map<std::string, int> set;
  for (size_t i = 0; i < channel.num_args; ++i) {
    if (channel.args[i].type == GRPC_ARG_INTEGER) {
      set[channel.args[i].key] = channel.args[i].value.integer;
    }
  }
  for (const auto& [name, value] : args) {
    CATCH_CAPTURE(name);
    CATCH_CHECK(set.count(name) == 1);
    if (set.count(name) == 1) CATCH_CHECK(set.at(name) == value);
  }
  CATCH_CHECK(set.at(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH) == kMaxMessageBytes);
}

}  // namespace
}  // namespace p3
