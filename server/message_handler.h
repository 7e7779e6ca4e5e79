// Hands a worker's messages to a ParameterShard: the protobuf side of the server's
// message handling, without any transport. The gRPC server uses it for every message,
// and the fuzzer (tests/fuzz/) drives it with arbitrary bytes.
//
// Example:
//   absl::StatusOr<HelloResult> joined = HandleHello(&shard, first.hello(), server_index);
//   absl::StatusOr<Handled> handled = HandleWorkerMessage(&shard, joined->rank, msg);
//
// Thread-safe as ParameterShard is.
#ifndef P3_SERVER_MESSAGE_HANDLER_H_
#define P3_SERVER_MESSAGE_HANDLER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "p3/core/parameter_shard.h"
#include "proto/p3.pb.h"
#include "proto/wire_codec.h"

namespace p3 {

struct HelloResult {
  int rank = 0;
  ClusterSignature signature;
  std::vector<ToWorker> out;  // what the shard sends the new worker at once
  // A Hello with `rejoin` (ParameterShard::Rejoin): the worker takes a dead process's
  // place and resumes once it knows every server's oldest version, this server's being
  // `current_version`.
  bool rejoined = false;
  uint64_t current_version = 0;
  // The plan the shard's slices are cut in (ParameterShard::plan_in_force), for the
  // Welcome: a worker whose Hello says takes_plan takes it before it starts or resumes.
  PlanInForce plan;
};

// Checks a Hello (protocol version, signature, server index) and joins the worker, or
// with `rejoin` set rejoins it.
absl::StatusOr<HelloResult> HandleHello(ParameterShard* shard, const wire::Hello& hello,
                                        int server_index);

// The checks HandleHello makes of a Hello with `rejoin`, changing nothing.
absl::Status CheckRejoinHello(const ParameterShard& shard, const wire::Hello& hello,
                              int server_index);

struct Handled {
  std::vector<ToWorker> out;
  bool done = false;      // the worker said Done
  bool all_done = false;  // ... and it was the last one
  // A Replan the shard accepted: the server forwards it to every worker.
  bool replan = false;
  uint64_t replan_from_iteration = 0;
  int64_t replan_slice_params = 0;
  // A membership change the shard accepted (elastic runs): forwarded to every worker.
  std::optional<MembershipChange> membership;
};

// One message after the Hello. An error means the message was refused and nothing changed;
// except that a SharedSlices message (several slices' gradients) whose form is right but
// one of whose slices the shard refuses ends at that slice, the ones before it handled
// (CheckSharedGradients; the stream ends with the refusal either way).
absl::StatusOr<Handled> HandleWorkerMessage(ParameterShard* shard, int rank,
                                            const wire::WorkerMessage& msg);

// The same into `handled`, which a stream reuses from message to message: its `out`
// keeps its capacity, so a gradient allocates nothing here. `shared`: the worker's shared
// memory (ParameterShard's SharedValues), null when the stream did not set any up (a
// message naming it is then refused).
absl::Status HandleWorkerMessage(ParameterShard* shard, int rank, const wire::WorkerMessage& msg,
                                 Handled* handled, const SharedValues* shared = nullptr);

// A colocated worker's SharedSlices message of gradients (WorkerMessage.shared_gradients,
// docs/protocol.md), checked as a whole before any of it is handled: shared memory set
// up (`shared` not null), 1 to kSharedBatchMax slices, each with shared_count and no
// values, no slice named twice. InvalidArgument naming what is wrong otherwise.
absl::Status CheckSharedGradients(const wire::SharedSlices& batch, const SharedValues* shared);

// One slice of a checked SharedSlices message, handled as the Gradient message of its own
// would be. Appends to handled->out and resets nothing else, so that a caller may hand
// each slice's values on before the next (the gRPC server does) or gather them all.
absl::Status HandleSharedGradient(ParameterShard* shard, int rank, const wire::SliceData& slice,
                                  Handled* handled, const SharedValues* shared);

// The same for a message decoded from the raw stream (proto/wire_codec.h): the values of
// an Init or a gradient are copied once, from gRPC's buffers straight into the shard.
// Both forms of a slice message go through the same checks (HandleSlice in the .cc).
absl::Status HandleWorkerMessage(ParameterShard* shard, int rank,
                                 const DecodedWorkerMessage& msg, Handled* handled,
                                 const SharedValues* shared);

}  // namespace p3

#endif  // P3_SERVER_MESSAGE_HANDLER_H_
