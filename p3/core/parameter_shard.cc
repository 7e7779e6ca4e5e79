#include "p3/core/parameter_shard.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "p3/base/status_macros.h"

namespace p3 {
namespace {

// A part of `n` values at `offset` must continue the `received` values so far of a slice
// of `length`, without gap or overlap, and carry at least one value.
absl::Status CheckPart(const char* what, int slice_id, int64_t length, int64_t received,
                       int64_t offset, int64_t n) {
  if (n < 1 || offset < 0 || n > length - offset) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of slice ", slice_id, ": ", n,
                                                   " values at offset ", offset,
                                                   " do not fit the slice's ", length));
  }
  if (offset != received) {
    return absl::InvalidArgumentError(absl::StrCat(what, " of slice ", slice_id,
                                                   ": a part at offset ", offset, "; expected ",
                                                   received, " (parts must come in order)"));
  }
  return absl::OkStatus();
}

// A message for a slice of the plan a re-plan replaced.
absl::Status RetiredSlice(const char* what, int slice_id) {
  return absl::FailedPreconditionError(absl::StrCat(
      what, " for slice ", slice_id, " of the plan before the re-plan; slice ids have changed"));
}

}  // namespace

ParameterShard::ParameterShard(const ShardOptions& options)
    : options_(options), optimizer_(options.optimizer) {}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Join(const ClusterSignature& sig, int rank) {
  if (sig.num_workers != options_.num_workers) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", rank, " expects ", sig.num_workers,
                                                      " workers; this server serves ",
                                                      options_.num_workers));
  }
  if (rank < 0 || rank >= sig.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is out of range for ", sig.num_workers, " workers"));
  }
  if (options_.server_index >= sig.num_servers) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", rank, " expects ", sig.num_servers,
                                                      " servers; this is server ",
                                                      options_.server_index));
  }
  if (sig.wire_dtype != options_.wire_dtype) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " uses scheduling.wire_dtype ", WireDTypeName(sig.wire_dtype),
        "; this server is configured for ", WireDTypeName(options_.wire_dtype)));
  }
  for (const TensorSignature& t : sig.tensors) {
    if (t.dtype != "float32") {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name, "\" has dtype ", t.dtype,
                                                     "; only float32 is supported"));
    }
  }
  absl::MutexLock lock(&mu_);
  if (!signature_.has_value()) {
    std::vector<TensorEntry> entries;
    for (const TensorSignature& t : sig.tensors) {
      int64_t numel = 1;
      for (int64_t d : t.shape) {
        if (d < 0 || (d > 0 && numel > kMaxPlanParams / d)) {
          return absl::InvalidArgumentError(
              absl::StrCat("tensor \"", t.name, "\" has a negative or too large dimension"));
        }
        numel *= d;
      }
      entries.push_back({t.name, numel});
    }
    SlicePlanOptions plan_options = sig.plan;
    plan_options.num_servers = sig.num_servers;
    absl::StatusOr<SlicePlan> plan = SlicePlan::Create(entries, plan_options);
    if (!plan.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker ", rank, "'s model cannot be planned: ", plan.status().message()));
    }
    signature_ = sig;
    plan_ = *std::move(plan);
    joined_.assign(sig.num_workers, false);
    finished_.assign(sig.num_workers, false);
    resuming_.assign(sig.num_workers, false);
    slices_.clear();
    slices_.resize(plan_->slices().size());
    uninitialized_ = 0;
    owned_slices_ = plan_->server_slices(options_.server_index).size();
    for (int id : plan_->server_slices(options_.server_index)) {
      const Slice& slice = plan_->slices()[id];
      auto state = std::make_unique<SliceState>();
      state->offset = slice.offset;
      state->length = slice.length;
      state->priority = slice.priority;
      {
        absl::MutexLock slice_lock(&state->mu);
        state->grads.resize(sig.num_workers);
        state->grad_ptrs.assign(sig.num_workers, nullptr);
        state->has.assign(sig.num_workers, false);
        state->received.assign(sig.num_workers, 0);
        state->catch_up.assign(sig.num_workers, false);
      }
      slices_[id] = std::move(state);
      ++uninitialized_;
    }
    if (options_.restore.has_value()) {
      if (absl::Status restored = Restore(); !restored.ok()) {
        signature_.reset();
        plan_.reset();
        slices_.clear();
        return restored;
      }
    }
    configured_ = true;
  } else {
    std::string diff = DescribeDifference(sig, *signature_);
    if (!diff.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("worker ", rank, " refused: ", diff));
    }
  }
  if (joined_[rank]) {
    return absl::AlreadyExistsError(absl::StrCat("worker ", rank, " has already joined"));
  }
  joined_[rank] = true;
  everyone_joined_ = std::all_of(joined_.begin(), joined_.end(), [](bool j) { return j; });
  std::vector<ToWorker> out;
  if (uninitialized_ == 0) {
    for (int id : plan_->server_slices(options_.server_index)) {
      SliceState& s = *slices_[id];
      absl::MutexLock slice_lock(&s.mu);
      AppendParams(id, s, rank, &out);
    }
  }
  return out;
}

absl::Status ParameterShard::Restore() {
  const ShardCheckpoint& ckpt = *options_.restore;
  auto mismatch = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint of iteration ", ckpt.iteration, " does not fit this model: ", why));
  };
  if (ckpt.server_index != options_.server_index) {
    return mismatch(absl::StrCat("it is server ", ckpt.server_index, "'s"));
  }
  if (ckpt.slices.size() != owned_slices_) {
    return mismatch(
        absl::StrCat("it holds ", ckpt.slices.size(), " slices; this server owns ", owned_slices_));
  }
  for (const SliceCheckpoint& s : ckpt.slices) {
    if (s.slice_id < 0 || s.slice_id >= static_cast<int>(slices_.size()) ||
        slices_[s.slice_id] == nullptr) {
      return mismatch(absl::StrCat("slice ", s.slice_id, " is not this server's"));
    }
    if (static_cast<int64_t>(s.params.size()) != slices_[s.slice_id]->length) {
      return mismatch(absl::StrCat("slice ", s.slice_id, " has ", s.params.size(),
                                   " parameters, expected ", slices_[s.slice_id]->length));
    }
  }
  for (const SliceCheckpoint& s : ckpt.slices) {
    SliceState& state = *slices_[s.slice_id];
    absl::MutexLock slice_lock(&state.mu);
    state.params = s.params;
    state.opt = s.optimizer;
    state.version = ckpt.iteration;
    state.initialized = true;
    TakeSnapshot(&state);
  }
  uninitialized_ = 0;
  return absl::OkStatus();
}

void ParameterShard::AddToCheckpoint(uint64_t version, SliceCheckpoint slice) {
  std::optional<ShardCheckpoint> complete;
  {
    absl::MutexLock lock(&checkpoint_mu_);
    ShardCheckpoint& ckpt = pending_checkpoints_[version];
    ckpt.iteration = version;
    ckpt.server_index = options_.server_index;
    ckpt.slices.push_back(std::move(slice));
    if (ckpt.slices.size() == owned_slices_) {
      std::sort(ckpt.slices.begin(), ckpt.slices.end(),
                [](const SliceCheckpoint& a, const SliceCheckpoint& b) {
                  return a.slice_id < b.slice_id;
                });
      complete = std::move(ckpt);
      pending_checkpoints_.erase(version);
    }
  }
  if (complete.has_value() && options_.on_checkpoint) options_.on_checkpoint(*std::move(complete));
}

absl::StatusOr<ParameterShard::SliceState*> ParameterShard::Lookup(int rank, int slice_id,
                                                                   const char* what) const {
  absl::MutexLock lock(&mu_);
  if (!configured_) return absl::FailedPreconditionError(absl::StrCat(what, " before any Hello"));
  if (rank < 0 || rank >= static_cast<int>(joined_.size()) || !joined_[rank]) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " from worker ", rank, ", which has not joined"));
  }
  if (finished_[rank]) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " from worker ", rank, " after its Done"));
  }
  if (resuming_[rank]) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " from rejoined worker ", rank, " before its Resume"));
  }
  if (slice_id < 0 || slice_id >= static_cast<int>(slices_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(what, " for unknown slice ", slice_id,
                                                   "; the plan has ", slices_.size(), " slices"));
  }
  if (slices_[slice_id] == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " for slice ", slice_id, ", which belongs to server ",
                     plan_->slices()[slice_id].server, ", not ", options_.server_index));
  }
  return slices_[slice_id].get();
}

std::vector<int> ParameterShard::JoinedRanksLocked() const {
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(joined_.size()); ++r) {
    if (joined_[r]) ranks.push_back(r);
  }
  return ranks;
}

bool ParameterShard::signature_values_on_push() const {
  absl::MutexLock lock(&mu_);
  return signature_.has_value() && signature_->values_on_push;
}

void ParameterShard::AppendParams(int slice_id, const SliceState& s, int rank,
                                  std::vector<ToWorker>* out) const {
  ToWorker& m = out->emplace_back();
  m.rank = rank;
  m.priority = s.priority;
  m.bytes = s.length * static_cast<int64_t>(BytesPerValue(options_.wire_dtype));
  m.message.kind = Downstream::Kind::kParams;
  m.message.slice_id = slice_id;
  m.message.version = s.version;
  m.message.offset = s.offset;
  m.message.values = s.snapshot;
}

void ParameterShard::AppendAck(int slice_id, const SliceState& s, int rank, uint64_t iteration,
                               std::vector<ToWorker>* out) {
  ToWorker& m = out->emplace_back();
  m.rank = rank;
  m.priority = s.priority;
  m.message.kind = Downstream::Kind::kAck;
  m.message.slice_id = slice_id;
  m.message.iteration = iteration;
}

void ParameterShard::TakeSnapshot(SliceState* s) const {
  // Encoded once per version, whatever the number of workers it goes to.
  std::shared_ptr<Snapshot> next = std::move(s->previous);
  // use_count() 1: only this slice holds the storage, and nobody can take a new
  // reference without the slice's lock. The fence pairs with the release in the last
  // holder's decrement, so its reads of the old values happen before these writes.
  if (next != nullptr && next.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);
  } else if (s->spare != nullptr) {
    next = std::move(s->spare);  // only this slice has ever held it
  } else {
    next = std::make_shared<Snapshot>(options_.wire_dtype);
    ++snapshot_allocations_;
  }
  next->Assign(s->params.data(), static_cast<int64_t>(s->params.size()));
  s->previous = std::move(s->snapshot);
  s->snapshot = std::move(next);
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Init(int rank, int slice_id,
                                                           const float* values, int64_t n,
                                                           int64_t offset) {
  return InitFrom(rank, slice_id, Part{.n = n, .floats = values}, offset);
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Init(
    int rank, int slice_id, const std::vector<absl::string_view>& segments, int64_t offset) {
  P3_ASSIGN_OR_RETURN(const int64_t n,
                      CountValues("initial values", slice_id, segments, WireDType::kFloat32));
  return InitFrom(rank, slice_id, Part{.n = n, .segments = &segments}, offset);
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Init(int rank, int slice_id,
                                                           const SharedValues& shared, int64_t n,
                                                           int64_t offset) {
  return InitFrom(rank, slice_id, Part{.n = n, .flat = shared.params}, offset);
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::InitFrom(int rank, int slice_id,
                                                               const Part& part, int64_t offset) {
  if (rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial values from worker ", rank, "; only worker 0 sends them"));
  }
  P3_ASSIGN_OR_RETURN(SliceState* const found, Lookup(rank, slice_id, "initial values"));
  SliceState& s = *found;
  bool last = false;
  {
    absl::MutexLock slice_lock(&s.mu);
    if (s.initialized) {
      return absl::AlreadyExistsError(
          absl::StrCat("slice ", slice_id, " already has initial values"));
    }
    const int64_t n = part.n;
    P3_RETURN_IF_ERROR(CheckPart("initial values", slice_id, s.length, s.init_received, offset, n));
    if (options_.keep_values) {
      s.params.resize(s.length);
      ReadPart(part, s, offset, WireDType::kFloat32, 0, s.params.data() + offset);
    }
    s.init_received = offset + n;
    if (s.init_received < s.length) return std::vector<ToWorker>{};
    if (options_.keep_values) TakeSnapshot(&s);
    s.initialized = true;
  }
  // Every slice is in: version 0 of all of them to every worker that has joined. The
  // ranks are taken in the same critical section as the count, so that a worker joining
  // right after gets version 0 from its Join and is not sent it a second time here.
  std::vector<int> ranks;
  std::vector<int> owned;
  {
    absl::MutexLock lock(&mu_);
    last = --uninitialized_ == 0;
    if (last) {
      ranks = JoinedRanksLocked();
      owned = plan_->server_slices(options_.server_index);
    }
  }
  if (!last) return std::vector<ToWorker>{};
  std::vector<ToWorker> out;
  for (int id : owned) {
    SliceState& t = *slices_[id];
    absl::MutexLock slice_lock(&t.mu);
    for (int r : ranks) AppendParams(id, t, r, &out);
  }
  return out;
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Gradient(int rank, int slice_id,
                                                               uint64_t iteration,
                                                               const float* values, int64_t n,
                                                               int64_t offset,
                                                               std::optional<int> scale_exponent) {
  std::vector<ToWorker> out;
  P3_RETURN_IF_ERROR(
      Gradient(rank, slice_id, iteration, values, n, offset, &out, scale_exponent));
  return out;
}

absl::Status ParameterShard::Gradient(int rank, int slice_id, uint64_t iteration,
                                      const float* values, int64_t n, int64_t offset,
                                      std::vector<ToWorker>* out,
                                      std::optional<int> scale_exponent) {
  return GradientFrom(rank, slice_id, iteration, Part{.n = n, .floats = values}, offset,
                      scale_exponent, out);
}

absl::Status ParameterShard::Gradient(int rank, int slice_id, uint64_t iteration,
                                      const std::vector<absl::string_view>& segments,
                                      int64_t offset, std::vector<ToWorker>* out,
                                      std::optional<int> scale_exponent) {
  P3_ASSIGN_OR_RETURN(const int64_t n,
                      CountValues("gradient", slice_id, segments, options_.wire_dtype));
  return GradientFrom(rank, slice_id, iteration, Part{.n = n, .segments = &segments}, offset,
                      scale_exponent, out);
}

absl::Status ParameterShard::Gradient(int rank, int slice_id, uint64_t iteration,
                                      const SharedValues& shared, int64_t n, int64_t offset,
                                      std::vector<ToWorker>* out,
                                      std::optional<int> scale_exponent) {
  return GradientFrom(rank, slice_id, iteration, Part{.n = n, .flat = shared.grads}, offset,
                      scale_exponent, out);
}

absl::StatusOr<int64_t> ParameterShard::CountValues(const char* what, int slice_id,
                                                    const std::vector<absl::string_view>& segments,
                                                    WireDType dtype) {
  size_t bytes = 0;
  for (const absl::string_view& segment : segments) bytes += segment.size();
  const size_t width = BytesPerValue(dtype);
  if (bytes % width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of slice ", slice_id, ": ", bytes, " bytes, not a whole number of ",
                     WireDTypeName(dtype), " values (", width, " bytes each)"));
  }
  return static_cast<int64_t>(bytes / width);
}

void ParameterShard::ReadPart(const Part& part, const SliceState& s, int64_t offset,
                              WireDType dtype, int scale_exponent, float* dest) {
  if (part.segments != nullptr) {
    // A value may straddle segments.
    DecodeSegments(dtype, *part.segments, scale_exponent, dest);
    return;
  }
  // Shared memory: only now, with the part checked against the slice, is the address formed.
  const float* from = part.flat != nullptr ? part.flat + s.offset + offset : part.floats;
  // float32: copied (any alignment); 16-bit: rounded as the wire would round them.
  RoundToWire(dtype, from, part.n, scale_exponent, dest);
}

absl::Status ParameterShard::CheckScale(int slice_id, std::optional<int> scale_exponent) const {
  absl::Status s = CheckScaleExponent(options_.wire_dtype, scale_exponent);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat("gradient of slice ", slice_id, ": ", s.message()));
}

absl::Status ParameterShard::GradientFrom(int rank, int slice_id, uint64_t iteration,
                                          const Part& part, int64_t offset,
                                          std::optional<int> scale_exponent,
                                          std::vector<ToWorker>* out) {
  const int64_t n = part.n;
  P3_RETURN_IF_ERROR(CheckScale(slice_id, scale_exponent));
  P3_ASSIGN_OR_RETURN(SliceState* const found, Lookup(rank, slice_id, "gradient"));
  SliceState& s = *found;
  const bool values_on_push = signature_values_on_push();
  std::optional<SliceCheckpoint> captured;
  uint64_t captured_version = 0;
  std::optional<uint64_t> advanced;  // the slice's new version, when this completed it
  {
    absl::MutexLock slice_lock(&s.mu);
    if (s.retired) return RetiredSlice("gradient", slice_id);
    if (!s.initialized) {
      return absl::FailedPreconditionError(
          absl::StrCat("gradient for slice ", slice_id, " before its initial values"));
    }
    if (iteration + 1 == s.version && s.catch_up[rank]) {
      // A rejoined worker's gradient of the iteration it resumed at, for a slice that
      // summed the dead process's (the same values: same parameters, same batch) already.
      // Its parts are checked and counted, not stored; the last one is answered.
      P3_RETURN_IF_ERROR(CheckPart("gradient", slice_id, s.length, s.received[rank], offset, n));
      s.received[rank] = offset + n;
      if (s.received[rank] < s.length) return absl::OkStatus();
      s.received[rank] = 0;
      s.catch_up[rank] = false;
      if (values_on_push) {
        AppendParams(slice_id, s, rank, out);
      } else {
        AppendAck(slice_id, s, rank, iteration, out);
      }
      return absl::OkStatus();
    }
    if (iteration != s.version) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient of slice ", slice_id, " for iteration ", iteration,
                       " from worker ", rank, "; the slice is at iteration ", s.version));
    }
    if (s.has[rank]) {
      return absl::AlreadyExistsError(absl::StrCat("duplicate gradient of slice ", slice_id,
                                                   " for iteration ", iteration, " from worker ",
                                                   rank));
    }
    P3_RETURN_IF_ERROR(CheckPart("gradient", slice_id, s.length, s.received[rank], offset, n));
    if (options_.keep_values) {
      // Allocates only the first time: the buffer keeps its size between iterations.
      s.grads[rank].resize(s.length);
      // Decoded straight into the slot.
      ReadPart(part, s, offset, options_.wire_dtype, scale_exponent.value_or(0),
               s.grads[rank].data() + offset);
    }
    s.received[rank] = offset + n;
    if (s.received[rank] < s.length) return absl::OkStatus();  // more parts to come
    s.received[rank] = 0;
    s.has[rank] = true;
    ++s.count;
    if (!values_on_push) {
      AppendAck(slice_id, s, rank, iteration, out);
    }
    const int workers = static_cast<int>(s.has.size());
    if (s.count < workers) return absl::OkStatus();

    // All gradients are in: their mean, summed in rank order so that the result does
    // not depend on arrival order, and the update, in one pass (SliceOptimizer::ApplyMean),
    // at the scheduled rate of this iteration: the version is the iteration whose
    // gradients these are, also after a restore, so a resumed run keeps its schedule.
    if (options_.keep_values) {
      for (int r = 0; r < workers; ++r) s.grad_ptrs[r] = s.grads[r].data();
      optimizer_.ApplyMean(s.params.data(), s.grad_ptrs.data(), workers, s.length, &s.opt,
                           optimizer_.LearningRate(static_cast<int64_t>(s.version)));
    }
    ++s.version;
    advanced = s.version;
    s.has.assign(workers, false);
    s.count = 0;
    if (options_.keep_values) TakeSnapshot(&s);
    if (values_on_push) {
      for (int r = 0; r < workers; ++r) AppendParams(slice_id, s, r, out);
    } else {
      for (int r : s.pending_pulls) AppendParams(slice_id, s, r, out);
      s.pending_pulls.clear();  // keeps its capacity for the next iteration
    }
    if (options_.keep_values && options_.checkpoint_every > 0 &&
        s.version % options_.checkpoint_every == 0) {
      captured = SliceCheckpoint{slice_id, s.params, s.opt};
      captured_version = s.version;
    }
  }  // slice_lock
  // Outside the slice's lock: the last slice of a checkpoint hands it on.
  if (captured.has_value()) AddToCheckpoint(captured_version, *std::move(captured));
  // The values appended above keep their slice ids; a re-plan may switch after them.
  if (advanced.has_value()) SliceAdvanced(*advanced);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Pull(int rank, int slice_id,
                                                           uint64_t version) {
  P3_ASSIGN_OR_RETURN(SliceState* const found, Lookup(rank, slice_id, "pull"));
  SliceState& s = *found;
  absl::MutexLock slice_lock(&s.mu);
  if (s.retired) return RetiredSlice("pull", slice_id);
  if (!s.initialized) {
    return absl::FailedPreconditionError(
        absl::StrCat("pull of slice ", slice_id, " before its initial values"));
  }
  if (version == s.version) {
    std::vector<ToWorker> out;
    AppendParams(slice_id, s, rank, &out);
    return out;
  }
  if (version == s.version + 1 && s.has[rank]) {
    for (int r : s.pending_pulls) {
      if (r == rank) {
        return absl::AlreadyExistsError(
            absl::StrCat("duplicate pull of slice ", slice_id, " from worker ", rank));
      }
    }
    s.pending_pulls.push_back(rank);
    return std::vector<ToWorker>{};
  }
  return absl::InvalidArgumentError(absl::StrCat("pull of slice ", slice_id, " version ", version,
                                                 " from worker ", rank,
                                                 "; the slice is at version ", s.version));
}

bool ParameterShard::Finish(int rank) {
  absl::MutexLock lock(&mu_);
  if (rank >= 0 && rank < static_cast<int>(finished_.size())) finished_[rank] = true;
  for (bool f : finished_) {
    if (!f) return false;
  }
  return !finished_.empty();
}

absl::Status ParameterShard::CheckRejoin(const ClusterSignature& sig, int rank) const {
  absl::MutexLock lock(&mu_);
  return CheckRejoinLocked(sig, rank);
}

absl::Status ParameterShard::CheckRejoinLocked(const ClusterSignature& sig, int rank) const {
  if (!options_.accept_rejoin) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", rank, " asks to rejoin, but this server does not accept rejoins ",
                     "(cluster.rejoin_timeout_s is 0)"));
  }
  if (rank < 0 || rank >= options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is out of range for ", options_.num_workers, " workers"));
  }
  if (!configured_ || uninitialized_ > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " asks to rejoin before the initial values are in; a worker that ",
        "dies during the handshake cannot rejoin (restart the run)"));
  }
  std::string diff = DescribeDifference(sig, *signature_);
  if (!diff.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", rank, " refused: ", diff));
  }
  if (replans_ > 0 || pending_replan_.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " asks to rejoin, but the run has re-planned its slices (online ",
        "search: scheduling.online_search), and a rejoining worker would start from the ",
        "config's plan; restart the run"));
  }
  if (finished_[rank]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " asks to rejoin after its Done; the end of a run cannot be redone"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ParameterShard::Rejoin(const ClusterSignature& sig, int rank) {
  std::vector<int> owned;
  {
    absl::MutexLock lock(&mu_);
    P3_RETURN_IF_ERROR(CheckRejoinLocked(sig, rank));
    joined_[rank] = true;
    resuming_[rank] = true;
    owned = plan_->server_slices(options_.server_index);
  }
  uint64_t oldest = UINT64_MAX;
  for (int id : owned) {
    SliceState& s = *slices_[id];
    absl::MutexLock slice_lock(&s.mu);
    if (s.has[rank]) {
      s.has[rank] = false;
      --s.count;
    }
    s.received[rank] = 0;
    s.catch_up[rank] = false;
    s.pending_pulls.erase(std::remove(s.pending_pulls.begin(), s.pending_pulls.end(), rank),
                          s.pending_pulls.end());
    oldest = std::min(oldest, s.version);
  }
  return oldest;
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Resume(int rank, uint64_t version) {
  std::vector<int> owned;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_ || rank < 0 || rank >= static_cast<int>(resuming_.size()) ||
        !resuming_[rank]) {
      return absl::FailedPreconditionError(
          absl::StrCat("a Resume from worker ", rank, ", which has not rejoined (or resumed)"));
    }
    owned = plan_->server_slices(options_.server_index);
  }
  // Checked first for every slice, so that a refusal changes nothing. The versions cannot
  // move meanwhile: each slice waits for this rank's gradient of its current iteration.
  for (int id : owned) {
    SliceState& s = *slices_[id];
    absl::MutexLock slice_lock(&s.mu);
    const bool behind = s.version == version + 1 && HasPrevious(s);
    if (s.version != version && !behind) {
      if (version < s.version) {
        // The worker found another server at an older version: that server is a new
        // process restored from a checkpoint, and this one cannot go back to it.
        return absl::FailedPreconditionError(absl::StrCat(
            "worker ", rank, " resumes at iteration ", version, ", before this server's slice ",
            id, " at version ", s.version,
            ": another server restarted from an older checkpoint, and this server cannot go "
            "back to it; it must restart from that checkpoint too "
            "(checkpoint.resume_iteration: -1)"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", rank, " cannot resume at version ", version, ": slice ", id, " is at version ",
          s.version, s.version == version + 1 ? " without its previous one" : ""));
    }
  }
  std::vector<ToWorker> out;
  for (int id : owned) {
    SliceState& s = *slices_[id];
    absl::MutexLock slice_lock(&s.mu);
    AppendParams(id, s, rank, &out);
    if (s.version == version + 1) {
      out.back().message.version = version;
      out.back().message.values = s.previous;
      s.catch_up[rank] = true;
    }
  }
  absl::MutexLock lock(&mu_);
  resuming_[rank] = false;
  return out;
}

bool ParameterShard::initialized() const {
  absl::MutexLock lock(&mu_);
  return configured_ && uninitialized_ == 0;
}

bool ParameterShard::everyone_joined() const {
  absl::MutexLock lock(&mu_);
  return everyone_joined_;
}

bool ParameterShard::TakesRejoinAsJoin() const {
  absl::MutexLock lock(&mu_);
  return options_.accept_rejoin && !everyone_joined_;
}

std::optional<SlicePlan> ParameterShard::plan() const {
  absl::MutexLock lock(&mu_);
  return plan_;
}

absl::StatusOr<std::pair<std::vector<float>, uint64_t>> ParameterShard::SliceValues(
    int slice_id) const {
  const SliceState* found = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_ || slice_id < 0 || slice_id >= static_cast<int>(slices_.size()) ||
        slices_[slice_id] == nullptr) {
      return absl::NotFoundError(absl::StrCat("slice ", slice_id, " is not on this server"));
    }
    found = slices_[slice_id].get();  // never freed (retired_)
  }
  const SliceState& s = *found;
  absl::MutexLock slice_lock(&s.mu);
  if (s.retired) return RetiredSlice("values", slice_id);
  return std::make_pair(s.params, s.version);
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Buffers(int rank, uint64_t round,
                                                              const float* values, int64_t n) {
  if (options_.server_index != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffers of worker ", rank, " sent to server ", options_.server_index, ", not server 0"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (rank < 0 || rank >= static_cast<int>(joined_.size()) || !joined_[rank]) {
      return absl::FailedPreconditionError(
          absl::StrCat("buffers of worker ", rank, ", which has not joined"));
    }
  }
  P3_ASSIGN_OR_RETURN(BufferAverage::Mean mean, buffers_.Add(rank, round, values, n));
  std::vector<ToWorker> out;
  if (mean.values == nullptr) return out;
  const int64_t bytes = static_cast<int64_t>(mean.values->size() * sizeof(float));
  for (int r = 0; r < options_.num_workers; ++r) {
    if (!mean.for_everyone && r != rank) continue;
    out.push_back(ToWorker{
        .rank = r,
        .message = {.kind = Downstream::Kind::kBuffers, .round = round, .buffers = mean.values},
        .bytes = bytes});
  }
  return out;
}

absl::Status ParameterShard::Replan(int rank, uint64_t from_iteration, int64_t slice_params) {
  auto refused = [&](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("re-plan to slices of ", slice_params,
                                                      " from iteration ", from_iteration,
                                                      " refused: ", why));
  };
  if (rank != 0) return refused(absl::StrCat("it came from worker ", rank, "; only worker 0 re-plans"));
  if (slice_params < 1) return refused("slice_params must be >= 1");
  if (options_.wire_dtype == WireDType::kFloat16) {
    return refused("on a float16 wire the scale is chosen per slice, so another cut would "
                   "round differently");
  }
  if (options_.checkpoint_every > 0 || options_.restore.has_value()) {
    return refused("checkpoints are kept per slice of one plan");
  }
  absl::MutexLock lock(&mu_);
  if (!configured_) return refused("no worker has joined");
  if (!signature_->values_on_push) return refused("the mode pulls values (no values on push)");
  if (plan_->options().granularity != Granularity::kSliced || plan_->options().owner_params < 1) {
    return refused("the plan has no ownership stripes (owner_params)");
  }
  if (pending_replan_.has_value()) {
    return refused(absl::StrCat("a re-plan from iteration ", pending_replan_->from_iteration,
                                " is pending"));
  }
  if (uninitialized_ > 0) return refused("not every slice has its initial values");
  absl::StatusOr<SlicePlan> plan = plan_->WithSliceParams(slice_params);
  if (!plan.ok()) return refused(plan.status().message());
  // From here every slice completion takes mu_ (SliceAdvanced), and waits for this call.
  replan_pending_.store(true, std::memory_order_release);
  size_t remaining = 0;
  for (const auto& state : slices_) {
    if (state == nullptr) continue;
    absl::MutexLock slice_lock(&state->mu);
    if (state->version >= from_iteration) {
      replan_pending_.store(false, std::memory_order_release);
      return refused(absl::StrCat("this server's slices are at version ", state->version,
                                  " already"));
    }
    ++remaining;
  }
  pending_replan_ = PendingReplan{from_iteration, *std::move(plan), remaining};
  if (remaining == 0) SwitchPlanLocked();  // a server that owns no slice
  return absl::OkStatus();
}

std::optional<std::pair<uint64_t, int64_t>> ParameterShard::ReplanPending() const {
  absl::MutexLock lock(&mu_);
  if (!pending_replan_.has_value()) return std::nullopt;
  return std::make_pair(pending_replan_->from_iteration,
                        pending_replan_->plan.options().slice_params);
}

int ParameterShard::replans() const {
  absl::MutexLock lock(&mu_);
  return replans_;
}

int64_t ParameterShard::StateFloats() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  auto add = [&total](const SliceState& s) {
    absl::MutexLock slice_lock(&s.mu);
    total += static_cast<int64_t>(s.params.capacity() + s.opt.buf.capacity() +
                                  s.opt.buf_sq.capacity());
    for (const std::vector<float>& g : s.grads) total += static_cast<int64_t>(g.capacity());
    for (const std::shared_ptr<Snapshot>* snapshot : {&s.snapshot, &s.previous, &s.spare}) {
      if (*snapshot != nullptr) total += (*snapshot)->capacity_bytes() / sizeof(float);
    }
  };
  for (const auto& state : slices_) {
    if (state != nullptr) add(*state);
  }
  for (const auto& state : retired_) add(*state);
  return total;
}

absl::StatusOr<std::pair<int64_t, int64_t>> ParameterShard::SliceSpan(int slice_id) const {
  absl::MutexLock lock(&mu_);
  if (!configured_ || slice_id < 0 || slice_id >= static_cast<int>(slices_.size()) ||
      slices_[slice_id] == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice ", slice_id, " is not a slice of this server's current plan"));
  }
  return std::make_pair(slices_[slice_id]->offset, slices_[slice_id]->length);
}

void ParameterShard::SliceAdvanced(uint64_t version) {
  // Set (release) by Replan() before it reads any slice's version under that slice's lock,
  // which this completion held after it: a slice it counted is seen here.
  if (!replan_pending_.load(std::memory_order_acquire)) return;
  absl::MutexLock lock(&mu_);
  if (!pending_replan_.has_value() || version != pending_replan_->from_iteration) return;
  if (--pending_replan_->remaining == 0) SwitchPlanLocked();
}

void ParameterShard::SwitchPlanLocked() {
  SlicePlan plan = std::move(pending_replan_->plan);
  const uint64_t version = pending_replan_->from_iteration;
  pending_replan_.reset();
  replan_pending_.store(false, std::memory_order_release);
  const int workers = options_.num_workers;
  // The current slices in flat order (the plan's order), locked for the copy: every one
  // is at `version` with no gradient of it in, so nothing else writes them.
  std::vector<SliceState*> old;
  for (const auto& state : slices_) {
    if (state != nullptr) old.push_back(state.get());
  }
  for (SliceState* o : old) o->mu.Lock();
  // An old state refuses every message from now on, so its buffers are dead once copied
  // from: freed as early as possible, so that the allocator hands their memory to the
  // new states instead of faulting in fresh pages (VGG-19: 2 - 15 s per switch, more than
  // an iteration; docs/simulator.md, "The cost of a switch"). Kept, they held a whole
  // plan's values, momentum, gradients and snapshots per re-plan (9.3 GB per VGG-19
  // server after 4 re-plans). Queued messages own their snapshots. First what the new
  // plan takes nothing from: the gradients (all summed) and the snapshots.
  for (SliceState* o : old) {
    o->retired = true;
    std::vector<std::vector<float>>().swap(o->grads);
    o->grad_ptrs.assign(o->grad_ptrs.size(), nullptr);
    o->snapshot.reset();
    o->previous.reset();
    o->spare.reset();
  }
  // Then each old state's values and optimizer state once the last new slice that
  // needs them is built.
  auto release = [](SliceState* o) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    std::vector<float>().swap(o->params);
    std::vector<float>().swap(o->opt.buf);
    std::vector<float>().swap(o->opt.buf_sq);
  };
  std::vector<std::unique_ptr<SliceState>> fresh(plan.slices().size());
  size_t from = 0;  // the old slice holding the next parameter to copy
  size_t released = 0;  // old[0, released) are freed
  for (int id : plan.server_slices(options_.server_index)) {
    const Slice& slice = plan.slices()[id];
    auto state = std::make_unique<SliceState>();
    state->offset = slice.offset;
    state->length = slice.length;
    state->priority = slice.priority;
    {
      absl::MutexLock slice_lock(&state->mu);
      state->initialized = true;
      state->version = version;
      state->grads.resize(workers);
      state->grad_ptrs.assign(workers, nullptr);
      state->has.assign(workers, false);
      state->received.assign(workers, 0);
      state->catch_up.assign(workers, false);
      if (options_.keep_values) {
        state->params.resize(slice.length);
        // Same stripes: the old slices of this shard cover this one exactly, in order.
        int64_t at = slice.offset;
        while (at < slice.offset + slice.length) {
          while (old[from]->offset + old[from]->length <= at) ++from;
          const SliceState& o = *old[from];
          const int64_t begin = at - o.offset;
          const int64_t count = std::min(o.length - begin, slice.offset + slice.length - at);
          const int64_t dest = at - slice.offset;
          std::copy_n(o.params.begin() + begin, count, state->params.begin() + dest);
          state->opt.steps = o.opt.steps;
          if (!o.opt.buf.empty()) {
            state->opt.buf.resize(slice.length);
            std::copy_n(o.opt.buf.begin() + begin, count, state->opt.buf.begin() + dest);
          }
          if (!o.opt.buf_sq.empty()) {
            state->opt.buf_sq.resize(slice.length);
            std::copy_n(o.opt.buf_sq.begin() + begin, count, state->opt.buf_sq.begin() + dest);
          }
          at += count;
        }
        // Every buffer the new plan needs, here rather than in its first updates: the
        // gradients, the snapshot of the current version and a spare for the next one
        // (after that, TakeSnapshot reuses the previous version's). Allocated later, when
        // the old plan's memory had gone to other buffers, they were fresh pages, in
        // timed iterations: VGG-19, 2 - 4 s more server CPU in the first or second
        // iteration on a plan of larger slices (docs/simulator.md, "The cost of a
        // switch"). The switch's own iteration is the one the online search leaves out.
        for (std::vector<float>& g : state->grads) g.resize(slice.length);
        TakeSnapshot(state.get());
        state->spare = std::make_shared<Snapshot>(options_.wire_dtype);
        state->spare->Reserve(slice.length);
        ++snapshot_allocations_;
      }
    }
    const int64_t end = slice.offset + slice.length;
    while (released < old.size() && old[released]->offset + old[released]->length <= end) {
      release(old[released++]);
    }
    fresh[id] = std::move(state);
  }
  for (SliceState* o : old) {
    release(o);  // those no new slice covered to their end (none when the stripes match)
    o->mu.Unlock();
  }
  for (auto& state : slices_) {
    if (state != nullptr) retired_.push_back(std::move(state));
  }
  slices_ = std::move(fresh);
  owned_slices_ = plan.server_slices(options_.server_index).size();
  plan_ = std::move(plan);
  ++replans_;
}

std::vector<SliceWait> ParameterShard::Waits() const {
  std::vector<SliceWait> waits;
  std::vector<bool> finished;
  std::vector<const SliceState*> states;  // never freed (retired_)
  {
    absl::MutexLock lock(&mu_);
    if (!configured_) return waits;
    finished = finished_;
    for (const auto& state : slices_) states.push_back(state.get());
  }
  for (size_t id = 0; id < states.size(); ++id) {
    const SliceState* s = states[id];
    if (s == nullptr) continue;
    absl::MutexLock lock(&s->mu);
    if (!s->initialized) continue;
    SliceWait wait{.slice_id = static_cast<int>(id), .iteration = s->version};
    for (size_t r = 0; r < s->has.size(); ++r) {
      if (!s->has[r] && !(r < finished.size() && finished[r])) {
        wait.missing_ranks.push_back(static_cast<int>(r));
      }
    }
    if (!wait.missing_ranks.empty()) waits.push_back(std::move(wait));
  }
  return waits;
}

}  // namespace p3
