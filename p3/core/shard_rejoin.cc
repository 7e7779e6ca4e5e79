// ParameterShard's rejoin and resume: a restarted worker takes a dead process's place
// (docs/protocol.md, "Rejoining worker").
#include "p3/core/parameter_shard.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/base/status_macros.h"

namespace p3 {

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

bool ParameterShard::everyone_joined() const {
  absl::MutexLock lock(&mu_);
  return everyone_joined_;
}

bool ParameterShard::TakesRejoinAsJoin() const {
  absl::MutexLock lock(&mu_);
  return options_.accept_rejoin && !everyone_joined_;
}

}  // namespace p3
