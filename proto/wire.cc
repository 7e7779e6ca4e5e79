#include "proto/wire.h"

#include <grpc/grpc.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace p3 {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

uint32_t HelloProtocolVersion(const ClusterSignature& sig) {
  if (sig.plan.pack_params > 0) return 5;
  if (sig.plan.owner_params > 0) return 4;
  return sig.wire_dtype == WireDType::kFloat32 ? 2 : 3;
}

void SignatureToHello(const ClusterSignature& sig, wire::Hello* hello) {
  hello->set_protocol_version(HelloProtocolVersion(sig));
  hello->set_num_workers(sig.num_workers);
  hello->set_num_servers(sig.num_servers);
  for (const TensorSignature& t : sig.tensors) {
    wire::TensorSpec* spec = hello->add_tensors();
    spec->set_name(t.name);
    for (int64_t d : t.shape) spec->add_shape(d);
    spec->set_dtype(t.dtype == "float32" ? wire::FLOAT32 : wire::DTYPE_UNSPECIFIED);
  }
  wire::SlicePlanSpec* plan = hello->mutable_plan();
  plan->set_granularity(sig.plan.granularity == Granularity::kSliced ? "sliced" : "tensor");
  plan->set_slice_params(sig.plan.slice_params);
  plan->set_split_threshold(sig.plan.split_threshold);
  plan->set_owner_params(sig.plan.owner_params);
  plan->set_pack_params(sig.plan.pack_params);
  hello->set_values_on_push(sig.values_on_push);
  hello->set_priority(sig.priority);
  switch (sig.wire_dtype) {
    case WireDType::kFloat32:
      hello->set_wire_dtype(wire::WIRE_FLOAT32);
      break;
    case WireDType::kBFloat16:
      hello->set_wire_dtype(wire::WIRE_BFLOAT16);
      break;
    case WireDType::kFloat16:
      hello->set_wire_dtype(wire::WIRE_FLOAT16);
      break;
  }
}

absl::StatusOr<ClusterSignature> SignatureFromHello(const wire::Hello& hello) {
  if (hello.protocol_version() < kMinProtocolVersion ||
      hello.protocol_version() > kProtocolVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("hello.protocol_version: ", hello.protocol_version(), "; this server speaks ",
                     kMinProtocolVersion, " to ", kProtocolVersion));
  }
  ClusterSignature sig;
  switch (hello.wire_dtype()) {
    case wire::WIRE_FLOAT32:
      sig.wire_dtype = WireDType::kFloat32;
      break;
    case wire::WIRE_BFLOAT16:
      sig.wire_dtype = WireDType::kBFloat16;
      break;
    case wire::WIRE_FLOAT16:
      sig.wire_dtype = WireDType::kFloat16;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("hello.wire_dtype: unknown value ", static_cast<int>(hello.wire_dtype()),
                       "; allowed: WIRE_FLOAT32, WIRE_BFLOAT16, WIRE_FLOAT16"));
  }
  if (sig.wire_dtype != WireDType::kFloat32 && hello.protocol_version() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.wire_dtype: ", WireDTypeName(sig.wire_dtype),
                     " needs protocol version 3; the Hello says ", hello.protocol_version()));
  }
  sig.num_workers = static_cast<int>(hello.num_workers());
  sig.num_servers = static_cast<int>(hello.num_servers());
  if (sig.num_workers < 1) return absl::InvalidArgumentError("hello.num_workers: must be >= 1");
  if (sig.num_servers < 1) return absl::InvalidArgumentError("hello.num_servers: must be >= 1");
  for (const wire::TensorSpec& spec : hello.tensors()) {
    TensorSignature t;
    t.name = spec.name();
    t.shape.assign(spec.shape().begin(), spec.shape().end());
    if (spec.dtype() != wire::FLOAT32) {
      return absl::InvalidArgumentError(
          absl::StrCat("hello.tensors[\"", spec.name(), "\"].dtype: only FLOAT32 is supported"));
    }
    sig.tensors.push_back(std::move(t));
  }
  const wire::SlicePlanSpec& plan = hello.plan();
  if (plan.granularity() == "sliced") {
    sig.plan.granularity = Granularity::kSliced;
  } else if (plan.granularity() == "tensor") {
    sig.plan.granularity = Granularity::kTensor;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("hello.plan.granularity: \"", plan.granularity(),
                                                   "\"; allowed: sliced, tensor"));
  }
  sig.plan.slice_params = plan.slice_params();
  sig.plan.split_threshold = plan.split_threshold();
  if (plan.owner_params() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.plan.owner_params: ", plan.owner_params(), "; allowed >= 0"));
  }
  if (plan.owner_params() > 0 && hello.protocol_version() < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello.plan.owner_params: ownership stripes need protocol version 4; the Hello says ",
        hello.protocol_version()));
  }
  sig.plan.owner_params = plan.owner_params();
  if (plan.pack_params() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.plan.pack_params: ", plan.pack_params(), "; allowed >= 0"));
  }
  if (plan.pack_params() > 0 && hello.protocol_version() < 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello.plan.pack_params: packs need protocol version 5; the Hello says ",
        hello.protocol_version()));
  }
  sig.plan.pack_params = plan.pack_params();
  sig.plan.num_servers = sig.num_servers;
  sig.values_on_push = hello.values_on_push();
  sig.priority = hello.priority();
  return sig;
}

KeepaliveSettings KeepaliveFor(absl::Duration peer_timeout) {
  // Clamped so that the int milliseconds gRPC takes cannot overflow (about 24 days).
  constexpr int64_t kMaxMs = std::numeric_limits<int>::max();
  const int64_t timeout_ms =
      std::clamp<int64_t>(absl::ToInt64Milliseconds(peer_timeout), 1000, kMaxMs);
  KeepaliveSettings k;
  k.timeout_ms = static_cast<int>(timeout_ms);
  k.time_ms = static_cast<int>(timeout_ms / 2);
  k.min_recv_ping_interval_ms = 500;
  return k;
}

std::vector<std::pair<std::string, int>> KeepaliveChannelArgs(absl::Duration peer_timeout) {
  const KeepaliveSettings k = KeepaliveFor(peer_timeout);
  return {
      {GRPC_ARG_KEEPALIVE_TIME_MS, k.time_ms},
      {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, k.timeout_ms},
      {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
      {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0},
      {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, k.min_recv_ping_interval_ms},
      {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0},
  };
}

grpc::ChannelArguments ChannelArgs(absl::Duration peer_timeout) {
  grpc::ChannelArguments args;
  for (const auto& [name, value] : KeepaliveChannelArgs(peer_timeout)) args.SetInt(name, value);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return args;
}

}  // namespace p3
