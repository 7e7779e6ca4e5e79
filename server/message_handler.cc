#include "server/message_handler.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "p3/base/status_macros.h"
#include "p3/core/wire_dtype.h"
#include "proto/wire.h"

namespace p3 {
namespace {

// Number of float32 values in a Buffers message's bytes.
absl::StatusOr<int64_t> FloatCount(const std::string& bytes) {
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffer values have ", bytes.size(), " bytes, not a whole number of float32"));
  }
  return static_cast<int64_t>(bytes.size() / sizeof(float));
}

// An Init or Gradient, whichever decoder read it: its header, the bytes of its values in
// `segments` (value_bytes in all), or none and `shared_count` values in the worker's
// shared memory. The message's form is checked here, its values against the slice by the
// shard (counts, parts, spans in shared memory, the scale of a gradient).
absl::Status HandleSlice(ParameterShard* shard, int rank, bool init, const SliceHeader& h,
                         const std::vector<absl::string_view>& segments, size_t value_bytes,
                         const SharedValues* shared, Handled* handled) {
  const char* what = init ? "initial values" : "gradient";
  if (h.slice_id > static_cast<uint32_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("slice id ", h.slice_id, " is out of range"));
  }
  const int slice_id = static_cast<int>(h.slice_id);
  if (h.offset > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("offset ", h.offset, " is out of range"));
  }
  const int64_t offset = static_cast<int64_t>(h.offset);
  const std::optional<int> scale =
      h.has_scale_exponent ? std::optional<int>(h.scale_exponent) : std::nullopt;
  if (init) {
    // Initial values are float32 on every stream.
    if (absl::Status s = CheckScaleExponent(WireDType::kFloat32, scale); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " of slice ", slice_id,
                                                     " (always float32): ", s.message()));
    }
  }
  if (h.shared_count != 0) {
    if (shared == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slice ", slice_id, ": values in shared memory, which this stream did not set up"));
    }
    if (value_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice ", slice_id, ": values both in the message and in shared memory"));
    }
    if (h.shared_count > static_cast<uint64_t>(INT64_MAX)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shared_count ", h.shared_count, " is out of range"));
    }
    const int64_t n = static_cast<int64_t>(h.shared_count);
    if (init) {
      P3_ASSIGN_OR_RETURN(handled->out, shard->Init(rank, slice_id, *shared, n, offset));
      return absl::OkStatus();
    }
    return shard->Gradient(rank, slice_id, h.iteration(), *shared, n, offset, &handled->out,
                           scale);
  }
  if (init) {
    P3_ASSIGN_OR_RETURN(handled->out, shard->Init(rank, slice_id, segments, offset));
    return absl::OkStatus();
  }
  // The hot path: appends to the reused vector.
  return shard->Gradient(rank, slice_id, h.iteration(), segments, offset, &handled->out, scale);
}

void Reset(Handled* handled) {
  handled->out.clear();
  handled->done = false;
  handled->all_done = false;
  handled->replan = false;
  handled->membership.reset();
}

// The signature of a Hello, after the checks that need no shard: rank and server index.
absl::StatusOr<ClusterSignature> CheckedSignature(const wire::Hello& hello, int server_index) {
  P3_ASSIGN_OR_RETURN(ClusterSignature sig, SignatureFromHello(hello));
  if (hello.rank() >= static_cast<uint32_t>(sig.num_workers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", hello.rank(), " is out of range for ", sig.num_workers, " workers"));
  }
  if (static_cast<int>(hello.server_index()) != server_index) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", hello.rank(), " addressed server ",
                                                      hello.server_index(), ", but this is server ",
                                                      server_index));
  }
  return sig;
}

}  // namespace

absl::Status CheckSharedGradients(const wire::SharedSlices& batch, const SharedValues* shared) {
  const int n = batch.slices_size();
  if (shared == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a SharedSlices message of ", n, " gradients, on a stream without shared memory"));
  }
  if (n == 0 || n > kSharedBatchMax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a SharedSlices message of ", n, " gradients (1 to ", kSharedBatchMax, " allowed)"));
  }
  for (int i = 0; i < n; ++i) {
    const wire::SliceData& d = batch.slices(i);
    if (d.shared_count() == 0 || !d.values().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a SharedSlices message: slice ", d.slice_id(), " (", i + 1, " of ", n,
                       ") has values in the message, not only in shared memory"));
    }
    for (int j = 0; j < i; ++j) {
      if (batch.slices(j).slice_id() == d.slice_id()) {
        return absl::InvalidArgumentError(absl::StrCat("a SharedSlices message names slice ",
                                                       d.slice_id(), " twice (", j + 1, " and ",
                                                       i + 1, " of ", n, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status HandleSharedGradient(ParameterShard* shard, int rank, const wire::SliceData& slice,
                                  Handled* handled, const SharedValues* shared) {
  return HandleSlice(shard, rank, /*init=*/false, HeaderOf(slice), {}, 0, shared, handled);
}

absl::Status CheckRejoinHello(const ParameterShard& shard, const wire::Hello& hello,
                              int server_index) {
  P3_ASSIGN_OR_RETURN(const ClusterSignature sig, CheckedSignature(hello, server_index));
  return shard.CheckRejoin(sig, static_cast<int>(hello.rank()), hello.takes_plan());
}

absl::StatusOr<HelloResult> HandleHello(ParameterShard* shard, const wire::Hello& hello,
                                        int server_index) {
  P3_ASSIGN_OR_RETURN(ClusterSignature sig, CheckedSignature(hello, server_index));
  HelloResult result;
  result.rank = static_cast<int>(hello.rank());
  if (hello.rejoin() && !shard->TakesRejoinAsJoin()) {
    P3_ASSIGN_OR_RETURN(result.current_version,
                        shard->Rejoin(sig, result.rank, hello.takes_plan()));
    result.rejoined = true;
  } else {
    P3_ASSIGN_OR_RETURN(result.out, shard->Join(sig, result.rank, hello.takes_plan()));
  }
  // Nothing switches the plan between: a rejoined rank's slices wait for its gradients
  // (a server without slices may switch, and its plan is then nobody's concern).
  result.plan = shard->plan_in_force();
  result.signature = std::move(sig);
  return result;
}

absl::StatusOr<Handled> HandleWorkerMessage(ParameterShard* shard, int rank,
                                            const wire::WorkerMessage& msg) {
  Handled handled;
  P3_RETURN_IF_ERROR(HandleWorkerMessage(shard, rank, msg, &handled));
  return handled;
}

absl::Status HandleWorkerMessage(ParameterShard* shard, int rank, const wire::WorkerMessage& msg,
                                 Handled* handled, const SharedValues* shared) {
  Reset(handled);
  absl::StatusOr<std::vector<ToWorker>> out;
  switch (msg.kind_case()) {
    case wire::WorkerMessage::kInit:
    case wire::WorkerMessage::kGradient: {
      const wire::SliceData& d = msg.has_init() ? msg.init() : msg.gradient();
      std::vector<absl::string_view> segments;
      if (!d.values().empty()) segments.emplace_back(d.values());
      return HandleSlice(shard, rank, msg.has_init(), HeaderOf(d), segments, d.values().size(),
                         shared, handled);
    }
    case wire::WorkerMessage::kSharedGradients:
      P3_RETURN_IF_ERROR(CheckSharedGradients(msg.shared_gradients(), shared));
      for (const wire::SliceData& slice : msg.shared_gradients().slices()) {
        P3_RETURN_IF_ERROR(HandleSharedGradient(shard, rank, slice, handled, shared));
      }
      return absl::OkStatus();
    case wire::WorkerMessage::kPull:
      if (msg.pull().slice_id() > static_cast<uint32_t>(INT32_MAX)) {
        return absl::InvalidArgumentError("pull: slice id out of range");
      }
      out = shard->Pull(rank, static_cast<int>(msg.pull().slice_id()), msg.pull().version());
      break;
    case wire::WorkerMessage::kBuffers: {
      P3_ASSIGN_OR_RETURN(const int64_t n, FloatCount(msg.buffers().values()));
      out = shard->Buffers(rank, msg.buffers().round(),
                           reinterpret_cast<const float*>(msg.buffers().values().data()), n);
      break;
    }
    case wire::WorkerMessage::kResume:
      out = shard->Resume(rank, msg.resume().version());
      break;
    case wire::WorkerMessage::kReplan:
      P3_RETURN_IF_ERROR(shard->Replan(rank, msg.replan().from_iteration(),
                                       msg.replan().slice_params()));
      handled->replan = true;
      handled->replan_from_iteration = msg.replan().from_iteration();
      handled->replan_slice_params = msg.replan().slice_params();
      return absl::OkStatus();
    case wire::WorkerMessage::kMembership: {
      MembershipChange change{.from_iteration = msg.membership().from_iteration()};
      for (uint32_t r : msg.membership().present()) {
        if (r > static_cast<uint32_t>(INT32_MAX)) {
          return absl::InvalidArgumentError("membership: rank out of range");
        }
        change.present.push_back(static_cast<int>(r));
      }
      P3_RETURN_IF_ERROR(shard->ChangeMembership(rank, change.from_iteration, change.present));
      handled->membership = std::move(change);
      return absl::OkStatus();
    }
    case wire::WorkerMessage::kReached:
      return shard->Reached(rank, msg.reached().version());
    case wire::WorkerMessage::kDone:
      handled->done = true;
      handled->all_done = shard->Finish(rank);
      return absl::OkStatus();
    case wire::WorkerMessage::kHello:
      return absl::InvalidArgumentError("a second Hello on the same stream");
    default:
      return absl::InvalidArgumentError("an empty or unknown message");
  }
  P3_ASSIGN_OR_RETURN(handled->out, std::move(out));
  return absl::OkStatus();
}

absl::Status HandleWorkerMessage(ParameterShard* shard, int rank,
                                 const DecodedWorkerMessage& msg, Handled* handled,
                                 const SharedValues* shared) {
  if (!msg.is_slice) return HandleWorkerMessage(shard, rank, msg.control, handled, shared);
  Reset(handled);
  return HandleSlice(shard, rank, msg.field == wire::WorkerMessage::kInitFieldNumber, msg.header,
                     msg.values, msg.value_bytes, shared, handled);
}

}  // namespace p3
