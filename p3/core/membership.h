// The present sets of an elastic run (docs/reliability.md, "Elastic membership"): which
// ranks take part in each iteration, kept as the list of changes from iteration 0 on.
//
// Ranks are 0..max_ranks-1. Ranks 0..initial-1 are present from iteration 0; a change
// (T, P) makes P the present set from iteration T on. Rank 0 is in every set, a rank that
// has left never comes back, and changes come in increasing order of T. Without elastic
// membership the schedule is one set, every rank, forever.
//
// Example:
//   MembershipSchedule m(/*max_ranks=*/3, /*initial=*/2);        // {0, 1} from 0
//   absl::Status ok = m.Add(100, {0, 1, 2});                     // {0, 1, 2} from 100
//   ok = m.Add(200, {0, 1});                                     // {0, 1} from 200
//   m.PresentAt(150);                       // {0, 1, 2}
//   m.SamplesBefore(250, /*batch=*/4);      // 4 * (100*2 + 100*3 + 50*2)
//
// A value type; not thread-safe (its owner guards it).
#ifndef P3_P3_CORE_MEMBERSHIP_H_
#define P3_P3_CORE_MEMBERSHIP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace p3 {

// From iteration `from_iteration` on, the ranks of `present` (in increasing order) take
// part.
struct MembershipChange {
  uint64_t from_iteration = 0;
  std::vector<int> present;
};

class MembershipSchedule {
 public:
  // Ranks 0..initial-1 from iteration 0, of max_ranks possible; `initial` is taken in
  // 1..max_ranks and max_ranks as at least 1 (the config validates both beforehand).
  MembershipSchedule(int max_ranks, int initial);

  // OK when (from_iteration, present) may follow the changes so far: from_iteration above
  // the last change's; `present` non-empty, strictly increasing, within 0..max_ranks-1,
  // holding rank 0 and no rank that has left. InvalidArgument or FailedPrecondition
  // naming the problem otherwise.
  absl::Status Check(uint64_t from_iteration, const std::vector<int>& present) const;
  // Check(), then records the change; nothing changes when it is refused.
  absl::Status Add(uint64_t from_iteration, std::vector<int> present);

  // The ranks present in `iteration`, in increasing order.
  const std::vector<int>& PresentAt(uint64_t iteration) const;
  // The present set of the last change (the one in force from its iteration on).
  const std::vector<int>& latest() const { return changes_.back().present; }
  // Every set so far, the first from iteration 0.
  const std::vector<MembershipChange>& changes() const { return changes_; }
  // Samples the run has read before `iteration` with `batch` per worker and iteration:
  // batch * sum over u < iteration of |PresentAt(u)| (where the next global batch starts in
  // the data stream; docs/reliability.md).
  int64_t SamplesBefore(uint64_t iteration, int64_t batch) const;
  // `rank` was present in a set and is not in the latest one.
  bool HasLeft(int rank) const;
  int max_ranks() const { return max_ranks_; }

 private:
  int max_ranks_;
  std::vector<MembershipChange> changes_;  // never empty; the first from iteration 0
};

// "0, 1, 2": for messages.
std::string DescribeRanks(const std::vector<int>& ranks);

}  // namespace p3

#endif  // P3_P3_CORE_MEMBERSHIP_H_
