// ParameterShard's re-plan: the slices are cut anew within the same ownership stripes
// at an iteration boundary (docs/protocol.md, "Re-plan"), and the old plan's state is
// retired.
#include "p3/core/parameter_shard.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace p3 {

absl::Status ParameterShard::Replan(int rank, uint64_t from_iteration, int64_t slice_params) {
  auto refused = [&](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("re-plan to slices of ", slice_params,
                                                      " from iteration ", from_iteration,
                                                      " refused: ", why));
  };
  if (rank != 0) return refused(absl::StrCat("it came from worker ", rank, "; only worker 0 re-plans"));
  if (slice_params < 1) return refused("slice_params must be >= 1");
  if (elastic()) return refused("the run is elastic (cluster.elastic), which does not re-plan");
  if (options_.wire_dtype == WireDType::kFloat16) {
    return refused("on a float16 wire the scale is chosen per slice, so another cut would "
                   "round differently");
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
    total += static_cast<int64_t>(s.sum.capacity());
    for (const std::vector<float>& g : s.early) total += static_cast<int64_t>(g.capacity());
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
    std::vector<float>().swap(o->sum);
    for (std::vector<float>& g : o->early) std::vector<float>().swap(g);
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
    std::unique_ptr<SliceState> state = NewSliceState(slice);
    {
      absl::MutexLock slice_lock(&state->mu);
      state->initialized = true;
      state->version = version;
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
        // gradients' sum (a rank arriving before those ranked above it allocates its
        // waiting buffer when it first does), the snapshot of the current version and a spare for the next one
        // (after that, TakeSnapshot reuses the previous version's). Allocated later, when
        // the old plan's memory had gone to other buffers, they were fresh pages, in
        // timed iterations: VGG-19, 2 - 4 s more server CPU in the first or second
        // iteration on a plan of larger slices (docs/simulator.md, "The cost of a
        // switch"). The switch's own iteration is the one the online search leaves out.
        state->sum.resize(slice.length);
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
  switches_[version] = plan.options().slice_params;
  plan_ = std::move(plan);
  plan_from_ = version;
  ++replans_;
}

}  // namespace p3
