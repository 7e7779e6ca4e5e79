// ParameterShard's membership and the lookups every call starts with: Join, Finish,
// the accessors, the model buffers' exchange and the stall report's waits. The other
// concepts live beside it (parameter_shard.h lists them).
#include "p3/core/parameter_shard.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/base/status_macros.h"

namespace p3 {

ParameterShard::ParameterShard(const ShardOptions& options)
    : options_(options), optimizer_(options.optimizer) {}

absl::Status ParameterShard::RetiredSlice(const char* what, int slice_id) {
  return absl::FailedPreconditionError(absl::StrCat(
      what, " for slice ", slice_id, " of the plan before the re-plan; slice ids have changed"));
}

std::unique_ptr<ParameterShard::SliceState> ParameterShard::NewSliceState(
    const Slice& slice) const {
  const int workers = options_.num_workers;
  auto state = std::make_unique<SliceState>();
  state->offset = slice.offset;
  state->length = slice.length;
  state->priority = slice.priority;
  absl::MutexLock slice_lock(&state->mu);
  state->early.resize(workers);
  state->in_sum.assign(workers, 0);
  state->has.assign(workers, false);
  state->received.assign(workers, 0);
  state->catch_up.assign(workers, false);
  SetPresent(state.get(), membership_.PresentAt(start_version()));
  return state;
}

absl::StatusOr<std::vector<ToWorker>> ParameterShard::Join(const ClusterSignature& sig, int rank,
                                                           bool takes_plan) {
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
  const bool restores_plan = options_.restore.has_value() &&
                             (options_.restore->slice_params > 0 ||
                              options_.restore->replan_slice_params > 0);
  if (!takes_plan && (signature_.has_value() ? plan_from_ > 0 : restores_plan)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " refused: this server restored a checkpoint taken under a re-plan, ",
        "and the worker does not take the servers' plan (Hello.takes_plan: an older binary)"));
  }
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
    // The restored checkpoint does not fit the model the first worker brings: no Hello
    // can start this run (restore_refusal()).
    auto refuse_restore = [&](absl::Status refusal) {
      restore_refusal_ = refusal;
      return refusal;
    };
    // A checkpoint taken under a re-plan holds that plan's slices.
    std::optional<SlicePlan> next;  // a re-plan that took effect at the checkpoint
    if (restores_plan) {
      const ShardCheckpoint& ckpt = *options_.restore;
      if (plan_options.granularity != Granularity::kSliced || plan_options.owner_params < 1) {
        return refuse_restore(absl::FailedPreconditionError(absl::StrCat(
            "the checkpoint of iteration ", ckpt.iteration, " was taken under a re-plan, ",
            "which needs ownership stripes (scheduling.owner_params); this plan has none")));
      }
      auto cut = [&](int64_t size) -> absl::StatusOr<SlicePlan> {
        absl::StatusOr<SlicePlan> cut = plan->WithSliceParams(size);
        if (cut.ok()) return cut;
        return refuse_restore(absl::FailedPreconditionError(
            absl::StrCat("the checkpoint of iteration ", ckpt.iteration, " is cut in slices of ",
                         size, ", which this model cannot take: ", cut.status().message())));
      };
      if (ckpt.slice_params > 0) {
        P3_ASSIGN_OR_RETURN(SlicePlan taken, cut(ckpt.slice_params));
        plan = std::move(taken);
      }
      if (ckpt.replan_slice_params > 0) {
        P3_ASSIGN_OR_RETURN(next, cut(ckpt.replan_slice_params));
      }
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
      slices_[id] = NewSliceState(plan_->slices()[id]);
      ++uninitialized_;
    }
    if (options_.restore.has_value()) {
      if (absl::Status restored = Restore(); !restored.ok()) {
        signature_.reset();
        plan_.reset();
        slices_.clear();
        return refuse_restore(restored);
      }
      if (options_.restore->slice_params > 0) plan_from_ = options_.restore->iteration;
      if (next.has_value()) {
        // Every restored slice is at the re-plan's iteration: it takes effect now.
        pending_replan_ = PendingReplan{options_.restore->iteration, *std::move(next), 0};
        SwitchPlanLocked();
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
  if (membership_.HasLeft(rank)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " refused: that rank has left the run, and a rank does not come back"));
  }
  joined_[rank] = true;
  // Elastic: the run starts once the ranks present at the start have joined (a restored
  // checkpoint's present set when resumed).
  const std::vector<int>& first = membership_.PresentAt(start_version());
  everyone_joined_ = std::all_of(first.begin(), first.end(), [&](int r) { return joined_[r]; });
  std::vector<ToWorker> out;
  if (uninitialized_ == 0) {
    for (int id : plan_->server_slices(options_.server_index)) {
      SliceState& s = *slices_[id];
      absl::MutexLock slice_lock(&s.mu);
      // A joining rank gets its first values when a change makes it present.
      if (s.place[rank] >= 0) AppendParams(id, s, rank, &out);
    }
  }
  return out;
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

std::vector<int> ParameterShard::joined_ranks() const {
  absl::MutexLock lock(&mu_);
  return JoinedRanksLocked();
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

bool ParameterShard::Finish(int rank) {
  absl::MutexLock lock(&mu_);
  if (rank >= 0 && rank < static_cast<int>(finished_.size())) finished_[rank] = true;
  // Every rank that joined, and every rank the last membership change expects, is done
  // (not elastic: every rank).
  const std::vector<int>& latest = membership_.latest();
  for (size_t r = 0; r < finished_.size(); ++r) {
    const bool expected = joined_[r] || std::binary_search(latest.begin(), latest.end(),
                                                           static_cast<int>(r));
    if (expected && !finished_[r]) return false;
  }
  return !finished_.empty();
}

absl::Status ParameterShard::restore_refusal() const {
  absl::MutexLock lock(&mu_);
  return restore_refusal_;
}

bool ParameterShard::initialized() const {
  absl::MutexLock lock(&mu_);
  return configured_ && uninitialized_ == 0;
}

PlanInForce ParameterShard::plan_in_force() const {
  absl::MutexLock lock(&mu_);
  if (plan_from_ == 0) return PlanInForce{};
  return PlanInForce{.from_iteration = plan_from_, .slice_params = plan_->options().slice_params};
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
  std::vector<int> present;  // the ranks that trained the iteration before the round
  {
    absl::MutexLock lock(&mu_);
    if (rank < 0 || rank >= static_cast<int>(joined_.size()) || !joined_[rank]) {
      return absl::FailedPreconditionError(
          absl::StrCat("buffers of worker ", rank, ", which has not joined"));
    }
    present = membership_.PresentAt(round > 0 ? round - 1 : 0);
  }
  P3_ASSIGN_OR_RETURN(BufferAverage::Mean mean, buffers_.Add(rank, round, values, n, present));
  std::vector<ToWorker> out;
  if (mean.values == nullptr) return out;
  const int64_t bytes = static_cast<int64_t>(mean.values->size() * sizeof(float));
  for (int r : present) {
    if (!mean.for_everyone && r != rank) continue;
    out.push_back(ToWorker{
        .rank = r,
        .message = {.kind = Downstream::Kind::kBuffers, .round = round, .buffers = mean.values},
        .bytes = bytes});
  }
  return out;
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
    for (int r : s->present) {
      if (!s->has[r] && !(static_cast<size_t>(r) < finished.size() && finished[r])) {
        wait.missing_ranks.push_back(r);
      }
    }
    if (!wait.missing_ranks.empty()) waits.push_back(std::move(wait));
  }
  return waits;
}

}  // namespace p3
