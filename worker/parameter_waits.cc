#include "worker/parameter_waits.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "p3/base/log_line.h"
#include "p3/base/tcp_nudge.h"
#include "p3/core/stall_report.h"

namespace p3 {

ParameterWaits::ParameterWaits(const ParameterWaitOptions& options, VersionTracker* tracker,
                               std::vector<int> block_tensors, std::vector<std::string> block_names)
    : options_(options),
      tracker_(tracker),
      block_tensors_(std::move(block_tensors)),
      block_names_(std::move(block_names)) {
  if (options_.trace != nullptr && options_.trace->enabled()) {
    wait_track_ = options_.trace->Track("wait for parameters");
  }
}

std::pair<int, int> ParameterWaits::BlockSlices(int block, const SlicePlan& plan) const {
  return plan.tensors_slices(block_tensors_[block], block_tensors_[block + 1]);
}

absl::Status ParameterWaits::WaitForBlock(int block, uint64_t version, const SlicePlan& plan) {
  const auto [first, last] = BlockSlices(block, plan);
  return Wait(first, last, version, plan);
}

absl::Status ParameterWaits::WaitForAll(uint64_t version, const SlicePlan& plan) {
  return Wait(0, static_cast<int>(plan.slices().size()), version, plan);
}

absl::Status ParameterWaits::Wait(int first, int last, uint64_t version, const SlicePlan& plan) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.bound;
  absl::Status s;
  // In steps of stall_report, each one over logged with what is still missing.
  for (absl::Time step = start;;) {
    const bool report = options_.stall_report > absl::ZeroDuration();
    if (report) step = std::min(deadline, step + options_.stall_report);
    s = tracker_->WaitFor(first, last, version, report ? step : deadline);
    if (!absl::IsDeadlineExceeded(s) || !report || step >= deadline) break;
    LogLine(DescribeValueWait(options_.rank, absl::Now() - start, version,
                              WaitName(first, last, plan),
                              tracker_->MissingSlices(first, last, version), plan));
    const std::string nudged =
        DescribeNudges(NudgeStuckTcpConnections({.remote_ports = options_.server_ports}));
    if (!nudged.empty()) LogLine(absl::StrCat("[stall] worker ", options_.rank, ": ", nudged));
  }
  const absl::Time end = absl::Now();
  total_ += end - start;
  if (options_.trace != nullptr && options_.trace->enabled() &&
      end - start > absl::Microseconds(20)) {
    options_.trace->Complete(wait_track_, absl::StrCat("wait v", version), "wait", start, end,
                             absl::StrCat("\"first_slice\": ", first, ", \"last_slice\": ", last));
  }
  if (absl::IsDeadlineExceeded(s)) {
    // Who owes the values, and whom the servers wait for: the cause is often not this
    // worker's link (docs/reliability.md, "Dead peers").
    std::string text = absl::StrCat("worker ", options_.rank, ": waited ",
                                    absl::FormatDuration(options_.bound),
                                    " for parameters: ", s.message());
    const std::string owed = DescribeValuesOwed(tracker_->MissingSlices(first, last, version),
                                                plan);
    if (!owed.empty()) absl::StrAppend(&text, "; missing: ", owed);
    const std::string hint =
        options_.hints != nullptr && version > 0 ? options_.hints->Describe(version - 1) : "";
    if (!hint.empty()) absl::StrAppend(&text, "; ", hint);
    return absl::DeadlineExceededError(text);
  }
  return s;
}

std::string ParameterWaits::WaitName(int first, int last, const SlicePlan& plan) const {
  for (size_t b = 0; b + 1 < block_tensors_.size(); ++b) {
    if (BlockSlices(static_cast<int>(b), plan) == std::make_pair(first, last)) {
      return absl::StrCat("block ", b, " (", block_names_[b], ")");
    }
  }
  return "every block";
}

}  // namespace p3
