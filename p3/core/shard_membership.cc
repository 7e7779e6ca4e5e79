// ParameterShard's elastic membership: the present set of ranks changes at an iteration
// boundary (docs/reliability.md, "Elastic membership").
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/core/parameter_shard.h"

namespace p3 {

void ParameterShard::SetPresent(SliceState* s, const std::vector<int>& present) const {
  s->present = present;
  s->place.assign(options_.num_workers, -1);
  for (size_t i = 0; i < present.size(); ++i) s->place[present[i]] = static_cast<int>(i);
}

void ParameterShard::AdvancePresent(SliceState* s) const {
  if (s->upcoming.empty() || s->upcoming.front().from_iteration != s->version) return;
  SetPresent(s, s->upcoming.front().present);
  s->upcoming.pop_front();
}

absl::Status ParameterShard::ChangeMembership(int rank, uint64_t from_iteration,
                                              std::vector<int> present) {
  auto refused = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("membership change to workers {",
                                                      DescribeRanks(present),
                                                      "} from iteration ", from_iteration,
                                                      " refused: ", why));
  };
  if (!elastic()) return refused("the run is not elastic (cluster.elastic is not set)");
  if (rank != 0) {
    return refused(absl::StrCat("it came from worker ", rank, "; only worker 0 changes it"));
  }
  absl::MutexLock lock(&mu_);
  if (!configured_ || uninitialized_ > 0) return refused("not every initial value is in");
  if (pending_replan_.has_value()) return refused("a re-plan is pending");
  if (absl::Status fits = membership_.Check(from_iteration, present); !fits.ok()) return fits;
  const std::vector<int>& now = membership_.latest();
  for (int r : present) {
    if (!std::binary_search(now.begin(), now.end(), r) && !joined_[r]) {
      return refused(absl::StrCat("worker ", r, " joins but has not said Hello to server ",
                                  options_.server_index));
    }
  }
  // Checked for every slice first, so that a refusal changes nothing. No slice can reach
  // from_iteration in between: that needs rank 0's gradient of from_iteration - 1, which
  // its stream carries after this change.
  for (const auto& state : slices_) {
    if (state == nullptr) continue;
    absl::MutexLock slice_lock(&state->mu);
    if (state->version >= from_iteration) {
      return refused(absl::StrCat("this server's slices are at version ", state->version,
                                  " already"));
    }
  }
  const MembershipChange change{from_iteration, present};
  for (const auto& state : slices_) {
    if (state == nullptr) continue;
    absl::MutexLock slice_lock(&state->mu);
    state->upcoming.push_back(change);
  }
  return membership_.Add(from_iteration, std::move(present));
}

std::vector<MembershipChange> ParameterShard::Membership() const {
  absl::MutexLock lock(&mu_);
  return membership_.changes();
}

}  // namespace p3
