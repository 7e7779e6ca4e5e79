// The forward pass's waits for parameters: block by block (or every block at once), each
// bounded, each over stall_report logged on stderr with the slices still missing and the
// servers that owe them (p3/core/stall_report.h), and recorded on the trace. A wait that
// times out says the same in its error, and what the servers said they wait for.
//
// Example:
//   ParameterWaits waits({.rank = 0, .bound = absl::Seconds(60)}, &tracker, block_tensors,
//                        block_names);
//   P3_RETURN_IF_ERROR(waits.WaitForBlock(b, version, core.plan()));   // the current plan
//
// Not thread-safe: the training thread waits; the tracker is thread-safe.
#ifndef P3_WORKER_PARAMETER_WAITS_H_
#define P3_WORKER_PARAMETER_WAITS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "p3/base/trace.h"
#include "p3/core/slice_plan.h"
#include "p3/core/stall_report.h"
#include "p3/core/version_tracker.h"

namespace p3 {

struct ParameterWaitOptions {
  // This worker's rank, for the messages. Default: 0.
  int rank = 0;
  // A wait longer than this fails with DeadlineExceeded. Default: 60 s.
  absl::Duration bound = absl::Seconds(60);
  // A wait is reported on stderr after this long, and again every stall_report while it
  // lasts; zero: no reports. Default: 10 s.
  absl::Duration stall_report = absl::Seconds(10);
  // Records each wait longer than 20 µs; not owned, may be null. Default: none.
  TraceRecorder* trace = nullptr;
  // What the servers said they wait for, added to a timed-out wait's error; not owned,
  // may be null. Default: none.
  const StallHints* hints = nullptr;
  // The servers' ports: at each stall report, this process's TCP connections to them
  // that a link fault left stuck (data queued, paced below 100 kbit/s) get their
  // congestion control re-initialised, and that is logged (p3/base/tcp_nudge.h).
  // Default: none.
  std::vector<int> server_ports;
};

class ParameterWaits {
 public:
  // Waits on `tracker` (not owned); block b of the model holds the tensors
  // [block_tensors[b], block_tensors[b+1]) and is called block_names[b].
  ParameterWaits(const ParameterWaitOptions& options, VersionTracker* tracker,
                 std::vector<int> block_tensors, std::vector<std::string> block_names);

  // Waits until block `block`'s slices in `plan` (the current one), or every slice of
  // `plan`, hold `version`.
  absl::Status WaitForBlock(int block, uint64_t version, const SlicePlan& plan);
  absl::Status WaitForAll(uint64_t version, const SlicePlan& plan);

  // Time spent waiting so far.
  absl::Duration total() const { return total_; }

 private:
  absl::Status Wait(int first, int last, uint64_t version, const SlicePlan& plan);
  // Slices [first, last) of block `block` in `plan`.
  std::pair<int, int> BlockSlices(int block, const SlicePlan& plan) const;
  // What [first, last) is, for stall reports: "block 3 (conv2)" or "every block".
  std::string WaitName(int first, int last, const SlicePlan& plan) const;

  const ParameterWaitOptions options_;
  VersionTracker* const tracker_;
  const std::vector<int> block_tensors_;
  const std::vector<std::string> block_names_;
  int wait_track_ = 0;
  absl::Duration total_;
};

}  // namespace p3

#endif  // P3_WORKER_PARAMETER_WAITS_H_
