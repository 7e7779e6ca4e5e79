// Conversions between the wire protocol (proto/p3.proto) and the scheduling core, used by
// both edges (server/ and worker/): Status codes, the handshake's signature, and the
// channel settings that bound how long a dead peer can go unnoticed.
#ifndef P3_PROTO_WIRE_H_
#define P3_PROTO_WIRE_H_

#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "p3/core/cluster_signature.h"
#include "proto/p3.pb.h"

namespace p3 {

// Bumped on any incompatible change of proto/p3.proto. Version 3 added the 16-bit wire
// (Hello.wire_dtype, SliceData.scale_exponent). A Hello carries the lowest version that
// describes its stream (HelloProtocolVersion): a float32 stream is byte for byte version
// 2, so such a worker still talks to a version-2 server, while a version-2 server, which
// would ignore wire_dtype and misread 16-bit values, refuses a 16-bit worker's Hello.
// Version 4 added ownership stripes (SlicePlanSpec.owner_params) and Replan; a Hello
// whose plan has stripes announces 4, so that an older server, which would ignore the
// stripes and plan differently, refuses it. Version 5 added packs
// (SlicePlanSpec.pack_params), announced the same way.
// A server accepts kMinProtocolVersion .. kProtocolVersion.
inline constexpr uint32_t kProtocolVersion = 5;
inline constexpr uint32_t kMinProtocolVersion = 2;

// The version a Hello announces: 5 for a plan with packs, 4 for one with ownership
// stripes, else 2 for a float32 stream and 3 for a 16-bit one.
uint32_t HelloProtocolVersion(const ClusterSignature& sig);

// A SharedSlices message (several slices' shared-memory descriptors in one, a colocated
// pair whose handshake agreed on it): a sender puts at most kSharedBatchSend slices in
// one, so that a message queued behind it waits for at most that many slices' work on
// the other side; a receiver refuses one of more than kSharedBatchMax.
inline constexpr int kSharedBatchSend = 16;
inline constexpr int kSharedBatchMax = 1024;

// Largest message either side accepts. Default bound for slices of up to 256 MiB.
inline constexpr int kMaxMessageBytes = 256 * 1024 * 1024 + 4096;

grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);

// Fills `hello` from a signature (rank and server index are set by the caller).
void SignatureToHello(const ClusterSignature& sig, wire::Hello* hello);
// Reads the signature of a Hello; errors name the bad field.
absl::StatusOr<ClusterSignature> SignatureFromHello(const wire::Hello& hello);

// How both sides of a stream find a silent peer: the one definition used by the worker's
// channels (ChannelArgs) and the server's builder (server/parameter_server.cc).
struct KeepaliveSettings {
  // Ping the peer after this long without a ping: peer_timeout / 2, at least 500 ms.
  int time_ms = 0;
  // A ping unanswered this long closes the connection: peer_timeout, at least 1 s. A
  // whole peer_timeout because a ping can queue behind a large slice on a slow, busy
  // link, and a false alarm ends the run.
  int timeout_ms = 0;
  // The receiving side accepts pings this close together (the smallest time_ms this
  // function gives), so that neither side's pings count as abuse.
  int min_recv_ping_interval_ms = 0;
};

// The keepalive settings for a cluster whose peer_timeout is `peer_timeout`.
KeepaliveSettings KeepaliveFor(absl::Duration peer_timeout);

// The keepalive settings as gRPC channel arguments (name, value), for a client's
// grpc::ChannelArguments and a server's grpc::ServerBuilder alike: pings also while no
// call is active, without a limit on pings without data, none counted as a strike.
std::vector<std::pair<std::string, int>> KeepaliveChannelArgs(absl::Duration peer_timeout);

// A worker's channel settings: KeepaliveChannelArgs and the message size limits.
grpc::ChannelArguments ChannelArgs(absl::Duration peer_timeout);

}  // namespace p3

#endif  // P3_PROTO_WIRE_H_
