#include "p3/core/membership.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3 {

std::string DescribeRanks(const std::vector<int>& ranks) { return absl::StrJoin(ranks, ", "); }

MembershipSchedule::MembershipSchedule(int max_ranks, int initial)
    : max_ranks_(std::max(1, max_ranks)) {
  MembershipChange first;
  for (int r = 0; r < std::clamp(initial, 1, max_ranks_); ++r) first.present.push_back(r);
  changes_.push_back(std::move(first));
}

absl::Status MembershipSchedule::Check(uint64_t from_iteration,
                                       const std::vector<int>& present) const {
  const std::string what = absl::StrCat("membership change to workers {", DescribeRanks(present),
                                        "} from iteration ", from_iteration, ": ");
  if (from_iteration <= changes_.back().from_iteration) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "the last change took effect at iteration ",
                     changes_.back().from_iteration, "; changes must come in iteration order"));
  }
  if (present.empty() || present.front() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "rank 0 must be present (it coordinates the changes)"));
  }
  for (size_t i = 0; i < present.size(); ++i) {
    if (present[i] >= max_ranks_) {
      return absl::InvalidArgumentError(absl::StrCat(what, "rank ", present[i],
                                                     " is out of range for ", max_ranks_,
                                                     " ranks (cluster.elastic.max_workers)"));
    }
    if (i > 0 && present[i] <= present[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "the ranks must be listed once each, in increasing order"));
    }
    if (HasLeft(present[i])) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, "rank ", present[i], " has left the run; a rank that left does not come back"));
    }
  }
  return absl::OkStatus();
}

absl::Status MembershipSchedule::Add(uint64_t from_iteration, std::vector<int> present) {
  if (absl::Status s = Check(from_iteration, present); !s.ok()) return s;
  changes_.push_back(MembershipChange{from_iteration, std::move(present)});
  return absl::OkStatus();
}

const std::vector<int>& MembershipSchedule::PresentAt(uint64_t iteration) const {
  // The last change at or before `iteration`; the first is from 0.
  auto after = std::upper_bound(
      changes_.begin(), changes_.end(), iteration,
      [](uint64_t t, const MembershipChange& c) { return t < c.from_iteration; });
  return std::prev(after)->present;
}

int64_t MembershipSchedule::SamplesBefore(uint64_t iteration, int64_t batch) const {
  int64_t samples = 0;
  for (size_t i = 0; i < changes_.size() && changes_[i].from_iteration < iteration; ++i) {
    const uint64_t end =
        i + 1 < changes_.size() ? std::min(iteration, changes_[i + 1].from_iteration) : iteration;
    samples += static_cast<int64_t>(end - changes_[i].from_iteration) *
               static_cast<int64_t>(changes_[i].present.size()) * batch;
  }
  return samples;
}

bool MembershipSchedule::HasLeft(int rank) const {
  const std::vector<int>& now = latest();
  if (std::binary_search(now.begin(), now.end(), rank)) return false;
  for (const MembershipChange& c : changes_) {
    if (std::binary_search(c.present.begin(), c.present.end(), rank)) return true;
  }
  return false;
}

}  // namespace p3
