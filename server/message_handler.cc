#include "server/message_handler.h"

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "p3/base/status_macros.h"
#include "p3/core/wire_dtype.h"
#include "proto/wire.h"

namespace p3 {
namespace {

// Number of float32 values in a slice message's bytes.
absl::StatusOr<int64_t> FloatCount(const std::string& bytes) {
  if (bytes.size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice values have ", bytes.size(), " bytes, not a whole number of float32"));
  }
  return static_cast<int64_t>(bytes.size() / sizeof(float));
}

// The number of values in a gradient's `bytes` on a stream of `dtype`.
absl::StatusOr<int64_t> ValueCount(const char* what, uint32_t slice_id, size_t bytes,
                                   WireDType dtype) {
  const size_t width = BytesPerValue(dtype);
  if (bytes % width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of slice ", slice_id, ": ", bytes, " bytes, not a whole number of ",
                     WireDTypeName(dtype), " values (", width, " bytes each)"));
  }
  return static_cast<int64_t>(bytes / width);
}

// Initial values are float32 on every stream: a scale is refused.
absl::Status CheckInitScale(uint32_t slice_id, bool has_scale) {
  if (!has_scale) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "initial values of slice ", slice_id, " with a scale_exponent (they are always float32)"));
}

std::optional<int> ScaleOf(bool has_scale, int32_t exponent) {
  if (!has_scale) return std::nullopt;
  return exponent;
}

// Where the values of a slice message with shared_count are: checked against the plan
// before any pointer is formed (the shard checks the same again).
absl::StatusOr<const float*> SharedSlice(const ParameterShard& shard, uint32_t slice_id,
                                         uint64_t offset, uint64_t count, bool has_values,
                                         bool init, const SharedValues* shared) {
  if (shared == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slice ", slice_id, ": values in shared memory, which this stream did not set up"));
  }
  if (has_values) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice ", slice_id, ": values both in the message and in shared memory"));
  }
  if (slice_id > static_cast<uint32_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("slice id ", slice_id, " is out of range"));
  }
  P3_ASSIGN_OR_RETURN(const auto span, shard.SliceSpan(static_cast<int>(slice_id)));
  const uint64_t length = static_cast<uint64_t>(span.second);
  if (count > length || offset > length - count) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice ", slice_id, " (", span.second, " values): ", count,
                     " values in shared memory at offset ", offset, " run past its end"));
  }
  return (init ? shared->params : shared->grads) + span.first + offset;
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

absl::Status CheckRejoinHello(const ParameterShard& shard, const wire::Hello& hello,
                              int server_index) {
  P3_ASSIGN_OR_RETURN(const ClusterSignature sig, CheckedSignature(hello, server_index));
  return shard.CheckRejoin(sig, static_cast<int>(hello.rank()));
}

absl::StatusOr<HelloResult> HandleHello(ParameterShard* shard, const wire::Hello& hello,
                                        int server_index) {
  P3_ASSIGN_OR_RETURN(ClusterSignature sig, CheckedSignature(hello, server_index));
  HelloResult result;
  result.rank = static_cast<int>(hello.rank());
  if (hello.rejoin() && !shard->TakesRejoinAsJoin()) {
    P3_ASSIGN_OR_RETURN(result.current_version, shard->Rejoin(sig, result.rank));
    result.rejoined = true;
  } else {
    P3_ASSIGN_OR_RETURN(result.out, shard->Join(sig, result.rank));
  }
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
  handled->out.clear();
  handled->done = false;
  handled->all_done = false;
  handled->replan = false;
  absl::StatusOr<std::vector<ToWorker>> out;
  switch (msg.kind_case()) {
    case wire::WorkerMessage::kInit:
    case wire::WorkerMessage::kGradient: {
      const wire::SliceData& d = msg.has_init() ? msg.init() : msg.gradient();
      if (d.slice_id() > static_cast<uint32_t>(INT32_MAX)) {
        return absl::InvalidArgumentError(
            absl::StrCat("slice id ", d.slice_id(), " is out of range"));
      }
      if (d.offset() > static_cast<uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError(absl::StrCat("offset ", d.offset(), " is out of range"));
      }
      const int64_t offset = static_cast<int64_t>(d.offset());
      const std::optional<int> scale = ScaleOf(d.has_scale_exponent(), d.scale_exponent());
      if (msg.has_init()) P3_RETURN_IF_ERROR(CheckInitScale(d.slice_id(), scale.has_value()));
      int64_t n = 0;
      const float* values = nullptr;
      if (d.shared_count() != 0) {
        P3_ASSIGN_OR_RETURN(values, SharedSlice(*shard, d.slice_id(), d.offset(), d.shared_count(),
                                                !d.values().empty(), msg.has_init(), shared));
        n = static_cast<int64_t>(d.shared_count());
      } else if (msg.has_gradient()) {
        // In the stream's dtype: decoded by the shard.
        P3_ASSIGN_OR_RETURN(n, ValueCount("gradient", d.slice_id(), d.values().size(),
                                           shard->wire_dtype()));
        const std::vector<absl::string_view> segments = {d.values()};
        return shard->Gradient(rank, static_cast<int>(d.slice_id()), d.iteration(), segments, n,
                               offset, &handled->out, scale);
      } else {
        P3_ASSIGN_OR_RETURN(n, FloatCount(d.values()));
        // The shard copies the values out with memcpy: no alignment is assumed.
        values = reinterpret_cast<const float*>(d.values().data());
      }
      if (msg.has_gradient()) {
        // The hot path: appends to the reused vector.
        return shard->Gradient(rank, static_cast<int>(d.slice_id()), d.iteration(), values, n,
                               offset, &handled->out, scale);
      }
      out = shard->Init(rank, static_cast<int>(d.slice_id()), values, n, offset);
      break;
    }
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
                                 const SharedValues* shared, std::string* scratch) {
  if (!msg.is_slice) return HandleWorkerMessage(shard, rank, msg.control, handled, shared);
  handled->out.clear();
  handled->done = false;
  handled->all_done = false;
  handled->replan = false;
  const SliceHeader& h = msg.header;
  if (h.slice_id > static_cast<uint32_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("slice id ", h.slice_id, " is out of range"));
  }
  const bool init = msg.field == wire::WorkerMessage::kInitFieldNumber;
  const std::optional<int> scale = ScaleOf(h.has_scale_exponent, h.scale_exponent);
  if (init) P3_RETURN_IF_ERROR(CheckInitScale(h.slice_id, scale.has_value()));
  // Gradients are in the stream's dtype, initial values in float32.
  const WireDType dtype = init ? WireDType::kFloat32 : shard->wire_dtype();
  P3_ASSIGN_OR_RETURN(const int64_t n, ValueCount(init ? "initial values" : "gradient", h.slice_id,
                                                         msg.value_bytes, dtype));
  if (h.offset > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("offset ", h.offset, " is out of range"));
  }
  const int64_t offset = static_cast<int64_t>(h.offset);
  if (h.shared_count != 0) {
    P3_ASSIGN_OR_RETURN(const float* values,
                        SharedSlice(*shard, h.slice_id, h.offset, h.shared_count, msg.value_bytes != 0,
                                    init, shared));
    const int64_t count = static_cast<int64_t>(h.shared_count);
    if (!init) {
      return shard->Gradient(rank, static_cast<int>(h.slice_id), h.iteration(), values, count,
                             offset, &handled->out, scale);
    }
    P3_ASSIGN_OR_RETURN(handled->out,
                        shard->Init(rank, static_cast<int>(h.slice_id), values, count, offset));
    return absl::OkStatus();
  }
  if (!init) {
    return shard->Gradient(rank, static_cast<int>(h.slice_id), h.iteration(), msg.values, n, offset,
                           &handled->out, scale);
  }
  // Init: once per slice at the start; values in one piece are used where they are.
  const char* bytes = msg.values.empty() ? nullptr : msg.values[0].data();
  if (msg.values.size() > 1) {
    scratch->clear();
    for (const absl::string_view& segment : msg.values) {
      scratch->append(segment.data(), segment.size());
    }
    bytes = scratch->data();
  }
  P3_ASSIGN_OR_RETURN(handled->out,
                      shard->Init(rank, static_cast<int>(h.slice_id),
                                  reinterpret_cast<const float*>(bytes), n, offset));
  return absl::OkStatus();
}

}  // namespace p3
