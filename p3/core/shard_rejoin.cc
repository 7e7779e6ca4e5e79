// ParameterShard's rejoin and resume: a restarted worker takes a dead process's place
// (docs/protocol.md, "Rejoining worker").
#include "p3/core/parameter_shard.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/base/status_macros.h"

namespace p3 {

absl::Status ParameterShard::CheckRejoin(const ClusterSignature& sig, int rank,
                                         bool takes_plan) const {
  absl::MutexLock lock(&mu_);
  return CheckRejoinLocked(sig, rank, takes_plan);
}

absl::Status ParameterShard::CheckRejoinLocked(const ClusterSignature& sig, int rank,
                                               bool takes_plan) const {
  if (!options_.accept_rejoin) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", rank, " asks to rejoin, but this server does not accept rejoins ",
                     "(cluster.rejoin_timeout_s is 0)"));
  }
  if (elastic()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " asks to rejoin, but this run is elastic (cluster.elastic), which ",
        "does not take rejoins"));
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
  if (!takes_plan && (plan_from_ > 0 || pending_replan_.has_value())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " asks to rejoin, but the run has re-planned its slices (online ",
        "search: scheduling.online_search), and this worker does not take the servers' plan ",
        "(Hello.takes_plan: a binary older than the re-plan's rejoin); it would start from ",
        "the config's plan"));
  }
  if (finished_[rank]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank, " asks to rejoin after its Done; the end of a run cannot be redone"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ParameterShard::Rejoin(const ClusterSignature& sig, int rank,
                                                bool takes_plan) {
  std::vector<int> owned;
  {
    absl::MutexLock lock(&mu_);
    P3_RETURN_IF_ERROR(CheckRejoinLocked(sig, rank, takes_plan));
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
    // What was summed of the dead process's gradient stays summed (s.in_sum[rank]); the
    // rest, and what waited for ranks before it, is dropped: the new process resends it.
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
  // A pending re-plan takes effect here at `version` + 1.
  std::optional<uint64_t> switch_at;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_ || rank < 0 || rank >= static_cast<int>(resuming_.size()) ||
        !resuming_[rank]) {
      return absl::FailedPreconditionError(
          absl::StrCat("a Resume from worker ", rank, ", which has not rejoined (or resumed)"));
    }
    owned = plan_->server_slices(options_.server_index);
    // The switch to this plan gave up the old plan's values of the versions before it,
    // which a worker resuming there would need (and its gradients would name the old
    // plan's slices). A server without slices switches as it accepts a re-plan: nothing
    // of it is needed.
    if (!owned.empty() && version < plan_from_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", rank, " resumes at iteration ", version, ", but this server's slices were ",
          "re-planned to slices of ", plan_->options().slice_params, " from iteration ",
          plan_from_, ": a worker that dies in the iteration before a re-plan takes effect on ",
          "every server cannot rejoin (the servers that switched no longer hold the old ",
          "plan's values of iteration ", version, "); restart the run (from a checkpoint)"));
    }
    if (pending_replan_.has_value() && pending_replan_->from_iteration == version + 1) {
      switch_at = version + 1;
    }
  }
  // Checked first for every slice, so that a refusal changes nothing. The versions cannot
  // move meanwhile: each slice waits for this rank's gradient of its current iteration.
  for (int id : owned) {
    SliceState& s = *slices_[id];
    absl::MutexLock slice_lock(&s.mu);
    const bool behind = s.version == version + 1 && HasPrevious(s);
    if (behind && switch_at.has_value()) {
      // This slice's answer (the catch-up of its gradient of `version`) could come after
      // the switch, which the worker's gradients of the other slices may bring first:
      // by then the slice and its values are the old plan's, retired.
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", rank, " resumes at iteration ", version, ", but a re-plan takes effect at ",
          *switch_at, " and this server's slice ", id, " is there already: a worker that dies ",
          "after some slices reached a pending re-plan's iteration and before all did cannot ",
          "rejoin; restart the run (from a checkpoint)"));
    }
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

bool ParameterShard::everyone_joined() const {
  absl::MutexLock lock(&mu_);
  return everyone_joined_;
}

bool ParameterShard::TakesRejoinAsJoin() const {
  absl::MutexLock lock(&mu_);
  return options_.accept_rejoin && !everyone_joined_;
}

}  // namespace p3
