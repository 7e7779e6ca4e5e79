#include "p3/core/worker_core.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {

WorkerCore::WorkerCore(const WorkerCoreOptions& options, SlicePlan plan, float* params,
                       const float* grads, VersionTracker* tracker)
    : options_(options), params_(params), grads_(grads), tracker_(tracker) {
  absl::MutexLock lock(&plan_mu_);
  plans_.push_back(std::make_unique<const SlicePlan>(std::move(plan)));
  slices_.reserve(current_plan().slices().size());
  for (size_t i = 0; i < current_plan().slices().size(); ++i) {
    slices_.push_back(std::make_unique<SliceState>());
  }
}

absl::Status WorkerCore::CheckSlice(int server, int64_t slice_id, const char* what) const {
  const SlicePlan& plan = current_plan();
  if (slice_id < 0 || slice_id >= static_cast<int64_t>(plan.slices().size()) ||
      (server >= 0 && plan.slices()[slice_id].server != server)) {
    if (server < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " of slice ", slice_id, ", which the plan does not have"));
    }
    return absl::InternalError(absl::StrCat("server ", server, " sent ", what, " of slice ",
                                            slice_id, ", which it does not own"));
  }
  return absl::OkStatus();
}

ToServer WorkerCore::Message(Upstream::Kind kind, int slice_id, bool values,
                             const float* tensor_gradient) const {
  const Slice& slice = current_plan().slices()[slice_id];
  ToServer m{.server = slice.server,
             .message = Upstream{.kind = kind, .slice_id = slice_id},
             .priority = slice.priority,
             .tiebreak = slice.id,
             .bytes = 0};
  if (!values) return m;
  // Initial values are float32 on every wire; gradients go in the wire's dtype.
  const bool gradient = kind == Upstream::Kind::kGradient;
  const float* buffer = gradient ? grads_ : params_;
  Upstream& up = m.message;
  if (gradient && tensor_gradient != nullptr) {
    up.values = tensor_gradient + (slice.offset - current_plan().tensor_offset(slice.tensor));
  } else {
    up.values = buffer == nullptr ? nullptr : buffer + slice.offset;
  }
  up.length = slice.length;
  up.encoding.dtype = gradient ? options_.wire_dtype : WireDType::kFloat32;
  if (up.encoding.dtype == WireDType::kFloat16 && up.values != nullptr) {
    up.encoding.scale_exponent = Float16ScaleExponent(up.values, up.length);
  }
  m.bytes = slice.length * static_cast<int64_t>(BytesPerValue(up.encoding.dtype));
  return m;
}

bool WorkerCore::started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

uint64_t WorkerCore::start_version() const {
  absl::MutexLock lock(&mu_);
  return start_version_;
}

absl::StatusOr<std::vector<ToServer>> WorkerCore::Start(
    const std::vector<uint64_t>& start_versions) {
  if (static_cast<int>(start_versions.size()) != options_.num_servers) {
    return absl::InvalidArgumentError(absl::StrCat("start versions of ", start_versions.size(),
                                                   " servers, expected ", options_.num_servers));
  }
  // Every server must start from the same version: 0 (fresh) or a checkpoint's.
  const uint64_t start = start_versions[0];
  for (size_t s = 1; s < start_versions.size(); ++s) {
    if (start_versions[s] != start) {
      return absl::FailedPreconditionError(absl::StrCat(
          "servers resumed from different checkpoints: server 0 at iteration ", start, ", server ",
          s, " at ", start_versions[s], "; choose a common one with checkpoint.resume_iteration"));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("the worker has started already");
    started_ = true;
    start_version_ = start;
  }
  std::vector<ToServer> out;
  if (options_.rank == 0 && start == 0) {
    absl::ReaderMutexLock plan_lock(&plan_mu_);
    out.reserve(current_plan().slices().size());
    for (const Slice& slice : current_plan().slices()) {
      out.push_back(Message(Upstream::Kind::kInit, slice.id, /*values=*/true));
    }
  }
  return out;
}

absl::StatusOr<std::vector<ToServer>> WorkerCore::Resume(
    const std::vector<uint64_t>& current_versions) {
  return Resume(current_versions, std::vector<bool>(current_versions.size(), true));
}

absl::StatusOr<std::vector<ToServer>> WorkerCore::Resume(const std::vector<uint64_t>& versions,
                                                         const std::vector<bool>& rejoined) {
  if (static_cast<int>(versions.size()) != options_.num_servers ||
      rejoined.size() != versions.size()) {
    return absl::InvalidArgumentError(absl::StrCat("versions of ", versions.size(),
                                                   " servers, expected ", options_.num_servers));
  }
  if (std::none_of(rejoined.begin(), rejoined.end(), [](bool r) { return r; })) {
    return Start(versions);
  }
  const uint64_t resume = *std::min_element(versions.begin(), versions.end());
  if (resume == UINT64_MAX) {
    return absl::FailedPreconditionError("no server reported a version to resume at");
  }
  bool any_new = false;
  for (int s = 0; s < options_.num_servers; ++s) {
    if (rejoined[s]) continue;
    any_new = true;
    if (versions[s] != resume) {
      return absl::FailedPreconditionError(absl::StrCat(
          "server ", s, " is a new process starting at iteration ", versions[s],
          ", but another continues the run at iteration ", resume,
          ": the servers restarted from different checkpoints"));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("the worker has started already");
    started_ = true;
    start_version_ = resume;
  }
  std::vector<ToServer> out;
  for (int s = 0; s < options_.num_servers; ++s) {
    if (!rejoined[s]) continue;
    // Ahead of anything else on the stream: the server accepts nothing before it.
    out.push_back(
        ToServer{.server = s,
                 .message = Upstream{.kind = Upstream::Kind::kResume, .version = resume},
                 .priority = std::numeric_limits<int64_t>::min(),
                 .tiebreak = 0,
                 .bytes = 0});
  }
  if (any_new && options_.rank == 0 && resume == 0) {
    // A new server without a checkpoint waits for the initial values, as at a first start.
    absl::ReaderMutexLock plan_lock(&plan_mu_);
    for (const Slice& slice : current_plan().slices()) {
      if (!rejoined[slice.server]) {
        out.push_back(Message(Upstream::Kind::kInit, slice.id, /*values=*/true));
      }
    }
  }
  return out;
}

absl::StatusOr<ToServer> WorkerCore::Gradient(int slice_id, uint64_t iteration,
                                               const float* tensor_gradient) {
  if (!started()) return absl::FailedPreconditionError("a gradient before the handshake");
  absl::ReaderMutexLock plan_lock(&plan_mu_);
  if (absl::Status s = CheckSlice(-1, slice_id, "a gradient"); !s.ok()) return s;
  if (!options_.values_on_push) {
    SliceState& state = *slices_[slice_id];
    absl::MutexLock lock(&state.mu);
    state.awaiting_ack = iteration;
  }
  ToServer m = Message(Upstream::Kind::kGradient, slice_id, /*values=*/true, tensor_gradient);
  m.message.iteration = iteration;
  return m;
}

absl::StatusOr<bool> WorkerCore::Params(int server, int64_t slice_id, uint64_t version,
                                        uint64_t offset, const ReceivedValues& values) {
  if (values.in_place_count != 0) {
    return ParamsInPlace(server, slice_id, version, offset, values.in_place_count);
  }
  size_t total = 0;
  for (const absl::string_view& segment : values.segments) total += segment.size();
  if (total != values.bytes) {
    return absl::InternalError(absl::StrCat("values of slice ", slice_id, ": segments of ", total,
                                            " bytes, expected ", values.bytes));
  }
  return Receive(server, slice_id, version, offset, &values.segments, values.bytes,
                 values.scale_exponent);
}

absl::StatusOr<bool> WorkerCore::Params(int server, int64_t slice_id, uint64_t version,
                                        uint64_t offset, const char* bytes, size_t size,
                                        std::optional<int> scale_exponent) {
  std::vector<absl::string_view> segments;
  if (bytes != nullptr) segments.emplace_back(bytes, size);
  return Params(server, slice_id, version, offset,
                ReceivedValues{.segments = std::move(segments),
                               .bytes = bytes == nullptr ? 0 : size,
                               .scale_exponent = scale_exponent});
}

absl::StatusOr<bool> WorkerCore::ParamsInPlace(int server, int64_t slice_id, uint64_t version,
                                               uint64_t offset, int64_t count) {
  if (count < 1) {
    return absl::InternalError(absl::StrCat("server ", server, " sent ", count,
                                            " values of slice ", slice_id, " in shared memory"));
  }
  // The server has decoded the values into place: counted as the stream's bytes would be.
  return Receive(server, slice_id, version, offset, nullptr,
                 static_cast<size_t>(count) * BytesPerValue(options_.wire_dtype), std::nullopt);
}

absl::StatusOr<bool> WorkerCore::Receive(int server, int64_t slice_id, uint64_t version,
                                         uint64_t offset,
                                         const std::vector<absl::string_view>* segments,
                                         size_t size, std::optional<int> scale_exponent) {
  const bool in_place = segments == nullptr;
  absl::ReaderMutexLock plan_lock(&plan_mu_);
  if (absl::Status s = CheckSlice(server, slice_id, "values"); !s.ok()) return s;
  const WireDType dtype = options_.wire_dtype;
  if (absl::Status s = CheckScaleExponent(dtype, in_place ? std::nullopt : scale_exponent);
      !in_place && !s.ok()) {
    return absl::InternalError(absl::StrCat("server ", server, " sent values of slice ", slice_id,
                                            ": ", s.message()));
  }
  const size_t width = BytesPerValue(dtype);
  const Slice& slice = current_plan().slices()[slice_id];
  SliceState& state = *slices_[slice_id];
  absl::MutexLock lock(&state.mu);
  // The tracker's version cannot change meanwhile: only a part of this slice (under its
  // lock) or a re-plan (under plan_mu_) changes it.
  const std::optional<uint64_t> holds = tracker_->Version(static_cast<int>(slice_id));
  if (holds.has_value() && version <= *holds) {
    return absl::InternalError(absl::StrCat("server ", server, " sent version ", version,
                                            " of slice ", slice_id, ", which holds version ",
                                            *holds, " already"));
  }
  if (state.received > 0 && version != state.receiving_version) {
    return absl::InternalError(absl::StrCat("server ", server, " sent a part of version ", version,
                                            " of slice ", slice_id, " while version ",
                                            state.receiving_version, " was arriving"));
  }
  // Each part continues the previous ones exactly: no gap, no overlap, not past the end.
  const int64_t n = static_cast<int64_t>(size / width);
  if (size % width != 0 || n < 1 || n > slice.length - state.received ||
      offset != static_cast<uint64_t>(state.received)) {
    return absl::InternalError(absl::StrCat(
        "server ", server, " sent slice ", slice_id, " (", slice.length, " values) with ", size,
        " bytes of ", WireDTypeName(dtype), " at offset ", offset, "; expected offset ",
        state.received));
  }
  // Decoded (float32: copied) straight into the parameters; a value may straddle two
  // segments of a received message.
  if (segments != nullptr) {
    DecodeSegments(dtype, *segments, scale_exponent.value_or(0),
                   params_ + slice.offset + state.received);
  }
  state.received += n;
  state.receiving_version = version;
  if (state.received < slice.length) return false;  // more parts to come
  state.received = 0;
  tracker_->MarkArrived(static_cast<int>(slice_id), version);
  return true;
}

absl::StatusOr<ToServer> WorkerCore::Ack(int server, int64_t slice_id, uint64_t iteration) {
  absl::ReaderMutexLock plan_lock(&plan_mu_);
  if (absl::Status s = CheckSlice(server, slice_id, "an Ack"); !s.ok()) return s;
  if (options_.values_on_push) {
    return absl::InternalError(absl::StrCat("server ", server, " sent an Ack of slice ", slice_id,
                                            ", but in this mode the values come with the push"));
  }
  SliceState& state = *slices_[slice_id];
  absl::MutexLock lock(&state.mu);
  if (state.awaiting_ack != iteration) {
    return absl::InternalError(absl::StrCat(
        "server ", server, " acknowledged iteration ", iteration, " of slice ", slice_id, ", ",
        state.awaiting_ack ? absl::StrCat("expected ", *state.awaiting_ack)
                           : std::string("which has no gradient awaiting an Ack")));
  }
  state.awaiting_ack.reset();
  ToServer pull = Message(Upstream::Kind::kPull, static_cast<int>(slice_id), /*values=*/false);
  pull.message.version = iteration + 1;
  return pull;
}

absl::Status WorkerCore::TakePlan(const std::vector<uint64_t>& versions,
                                  const std::vector<PlanInForce>& plans) {
  if (static_cast<int>(versions.size()) != options_.num_servers ||
      plans.size() != versions.size()) {
    return absl::InvalidArgumentError(absl::StrCat("versions and plans of ", versions.size(), " and ",
                                                   plans.size(), " servers, expected ",
                                                   options_.num_servers));
  }
  if (started()) return absl::FailedPreconditionError("a plan taken after the handshake");
  const uint64_t at = *std::min_element(versions.begin(), versions.end());
  std::optional<int> named;  // the first server with slices
  for (int s = 0; s < static_cast<int>(plans.size()); ++s) {
    if (versions[s] == UINT64_MAX) continue;
    if (plans[s].slice_params != 0 && plans[s].from_iteration > at) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", options_.rank, " resumes at iteration ", at, ", but server ", s,
          " re-planned its slices to ", plans[s].slice_params, " from iteration ",
          plans[s].from_iteration, " already: a worker that dies after a re-plan took effect ",
          "on some servers and before it did on all cannot rejoin (those servers no longer ",
          "hold the old plan's values of iteration ", at, "); restart the run (from a checkpoint)"));
    }
    if (!named.has_value()) {
      named = s;
    } else if (plans[s].slice_params != plans[*named].slice_params) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", options_.rank, ": server ", *named, " names slices of ",
          plans[*named].slice_params, " and server ", s, " slices of ", plans[s].slice_params,
          " (0: the config's plan); the servers are on different plans"));
    }
  }
  absl::MutexLock plan_lock(&plan_mu_);
  const SlicePlan& base = *plans_.front();
  const int64_t size = named.has_value() && plans[*named].slice_params != 0
                           ? plans[*named].slice_params
                           : base.options().slice_params;
  if (size == current_plan().options().slice_params) return absl::OkStatus();
  if (base.options().granularity != Granularity::kSliced || base.options().owner_params < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the servers name slices of ", size, ", but this worker's plan has no ownership ",
        "stripes (owner_params) to cut them in"));
  }
  absl::StatusOr<SlicePlan> cut = base.WithSliceParams(size);
  if (!cut.ok()) return cut.status();
  SlicePlan plan = *std::move(cut);
  std::vector<std::unique_ptr<SliceState>> fresh;
  fresh.reserve(plan.slices().size());
  for (size_t i = 0; i < plan.slices().size(); ++i) fresh.push_back(std::make_unique<SliceState>());
  slices_ = std::move(fresh);
  tracker_->Reset(static_cast<int>(plan.slices().size()));
  plans_.push_back(std::make_unique<const SlicePlan>(std::move(plan)));
  return absl::OkStatus();
}

absl::Status WorkerCore::Replan(SlicePlan plan, uint64_t version) {
  if (!started()) return absl::FailedPreconditionError("a re-plan before the handshake");
  absl::MutexLock plan_lock(&plan_mu_);
  const SlicePlan& current = current_plan();
  const SlicePlanOptions& now = current.options();
  const SlicePlanOptions& next = plan.options();
  if (plan.total_params() != current.total_params() ||
      plan.tensors().size() != current.tensors().size() ||
      next.num_servers != now.num_servers || next.granularity != Granularity::kSliced ||
      now.owner_params < 1 || next.owner_params != now.owner_params ||
      next.pack_params != now.pack_params) {
    return absl::InvalidArgumentError(
        "a re-plan must keep the tensors, the servers, the ownership stripes (owner_params) "
        "and the packs (pack_params)");
  }
  for (size_t id = 0; id < slices_.size(); ++id) {
    SliceState& state = *slices_[id];
    absl::MutexLock lock(&state.mu);
    const std::optional<uint64_t> holds = tracker_->Version(static_cast<int>(id));
    if (holds != version || state.received > 0 || state.awaiting_ack.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a re-plan at iteration ", version, " while slice ", id, " holds ",
          holds.has_value() ? absl::StrCat("version ", *holds) : std::string("no version"),
          state.received > 0 ? " with a later one arriving" : "",
          state.awaiting_ack.has_value() ? " awaiting an Ack" : ""));
    }
  }
  std::vector<std::unique_ptr<SliceState>> fresh;
  fresh.reserve(plan.slices().size());
  for (size_t i = 0; i < plan.slices().size(); ++i) fresh.push_back(std::make_unique<SliceState>());
  slices_ = std::move(fresh);
  tracker_->Reset(static_cast<int>(plan.slices().size()), version);
  plans_.push_back(std::make_unique<const SlicePlan>(std::move(plan)));
  return absl::OkStatus();
}

const SlicePlan& WorkerCore::plan() const {
  absl::ReaderMutexLock plan_lock(&plan_mu_);
  return current_plan();
}

}  // namespace p3
