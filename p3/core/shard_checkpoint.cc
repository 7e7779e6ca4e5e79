// ParameterShard's checkpoints: a restored checkpoint applied at the first Join, the
// slices of an iteration gathered into one checkpoint as they reach it, and the empty
// checkpoints of a shard that owns no slice (Reached).
#include "p3/core/parameter_shard.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {

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
    std::string why =
        absl::StrCat("it holds ", ckpt.slices.size(), " slices; this server owns ", owned_slices_);
    if (plan_.has_value() && plan_->options().pack_params > 0) {
      // Packs are the config's default since 2026-12-05: a checkpoint from before them.
      absl::StrAppend(&why, " in packs of ", plan_->options().pack_params,
                      " (a checkpoint taken without packs needs scheduling.pack_params: 0)");
    }
    return mismatch(why);
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
  // An elastic run's checkpoint: the membership up to its iteration (docs/reliability.md,
  // "Elastic membership"); the restored slices take part with its present set.
  if (!ckpt.membership.empty()) {
    if (!elastic()) return mismatch("it is an elastic run's (cluster.elastic); this run is not");
    const MembershipChange& first = ckpt.membership.front();
    if (first.from_iteration != 0 || first.present != membership_.changes().front().present) {
      return mismatch(absl::StrCat("its run started with workers {", DescribeRanks(first.present),
                                   "}; this one with {",
                                   DescribeRanks(membership_.changes().front().present), "}"));
    }
    MembershipSchedule restored = membership_;
    for (size_t i = 1; i < ckpt.membership.size(); ++i) {
      if (absl::Status added =
              restored.Add(ckpt.membership[i].from_iteration, ckpt.membership[i].present);
          !added.ok()) {
        return mismatch(std::string(added.message()));
      }
    }
    membership_ = std::move(restored);
  }
  for (const SliceCheckpoint& s : ckpt.slices) {
    SliceState& state = *slices_[s.slice_id];
    absl::MutexLock slice_lock(&state.mu);
    if (elastic()) {
      SetPresent(&state, membership_.PresentAt(ckpt.iteration));
      state.upcoming.clear();
    }
    state.params = s.params;
    state.sum.resize(state.length);
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
  if (!complete.has_value()) return;
  {
    // The plan the slices were cut in, and a re-plan that takes effect at this iteration:
    // the last slice's Gradient() switches only after this (SliceAdvanced), and no slice
    // reaches the next version before the switch, so the plan read here is the slices'.
    absl::MutexLock lock(&mu_);
    if (plan_from_ > 0) complete->slice_params = plan_->options().slice_params;
    if (pending_replan_.has_value() && pending_replan_->from_iteration == version) {
      complete->replan_slice_params = pending_replan_->plan.options().slice_params;
    }
    // The membership up to this iteration: a change from a later one may or may not have
    // come yet, so it is left out (ShardCheckpoint::membership).
    if (elastic()) {
      for (const MembershipChange& c : membership_.changes()) {
        if (c.from_iteration <= version) complete->membership.push_back(c);
      }
    }
  }
  if (options_.on_checkpoint) options_.on_checkpoint(*std::move(complete));
}

bool ParameterShard::WantsReachedLocked() const {
  return configured_ && owned_slices_ == 0 && options_.keep_values &&
         options_.checkpoint_every > 0 && options_.on_checkpoint != nullptr;
}

bool ParameterShard::wants_reached() const {
  absl::MutexLock lock(&mu_);
  return WantsReachedLocked();
}

absl::Status ParameterShard::Reached(int rank, uint64_t version) {
  ShardCheckpoint ckpt;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_ || rank < 0 || rank >= static_cast<int>(joined_.size()) || !joined_[rank]) {
      return absl::FailedPreconditionError(
          absl::StrCat("reached from worker ", rank, ", which has not joined"));
    }
    if (rank != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("reached from worker ", rank, "; only worker 0 sends it"));
    }
    if (owned_slices_ > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reached sent to server ", options_.server_index, ", which owns slices"));
    }
    if (version <= std::max(reached_, start_version())) return absl::OkStatus();
    reached_ = version;
    if (!WantsReachedLocked() || version % options_.checkpoint_every != 0) {
      return absl::OkStatus();
    }
    // What a server with slices records at this version (AddToCheckpoint): the plan its
    // slices were cut in, a re-plan that takes effect at it, the membership up to it.
    // Re-plans and membership changes reach every server before the iteration they start
    // at, so before worker 0 holds a version they are part of.
    ckpt.iteration = version;
    ckpt.server_index = options_.server_index;
    if (options_.restore.has_value()) ckpt.slice_params = options_.restore->slice_params;
    for (const auto& [from, slice_params] : switches_) {
      if (from < version) ckpt.slice_params = slice_params;
      if (from == version) ckpt.replan_slice_params = slice_params;
    }
    if (elastic()) {
      for (const MembershipChange& c : membership_.changes()) {
        if (c.from_iteration <= version) ckpt.membership.push_back(c);
      }
    }
  }
  options_.on_checkpoint(std::move(ckpt));
  return absl::OkStatus();
}

}  // namespace p3
