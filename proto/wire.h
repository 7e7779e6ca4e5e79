// Conversions between the wire protocol (proto/p3.proto) and the scheduling core, used by
// both edges (server/ and worker/): Status codes, the handshake's signature, and the
// channel settings that bound how long a dead peer can go unnoticed.
#ifndef P3_PROTO_WIRE_H_
#define P3_PROTO_WIRE_H_

#include <cstdint>
#include <string>

#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "p3/cluster_signature.h"
#include "proto/p3.pb.h"

namespace p3 {

// Bumped on any incompatible change of proto/p3.proto.
inline constexpr uint32_t kProtocolVersion = 1;

// Largest message either side accepts. Default bound for slices of up to 256 MiB.
inline constexpr int kMaxMessageBytes = 256 * 1024 * 1024 + 4096;

grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);

// Fills `hello` from a signature (rank and server index are set by the caller).
void SignatureToHello(const ClusterSignature& sig, wire::Hello* hello);
// Reads the signature of a Hello; errors name the bad field.
absl::StatusOr<ClusterSignature> SignatureFromHello(const wire::Hello& hello);

// Keepalive pings every `peer_timeout`/2, a peer that does not answer within
// `peer_timeout` is considered dead, and message size limits.
grpc::ChannelArguments ChannelArgs(absl::Duration peer_timeout);

}  // namespace p3

#endif  // P3_PROTO_WIRE_H_
