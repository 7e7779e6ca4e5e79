#include "worker/parameter_waits.h"

#include <string>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "p3/core/slice_plan.h"
#include "p3/core/stall_report.h"
#include "p3/core/version_tracker.h"

namespace p3 {
namespace {

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != std::string::npos;
}

SlicePlan TwoServerPlan() {
  SlicePlanOptions options;
  options.granularity = Granularity::kSliced;
  options.slice_params = 10;
  options.num_servers = 2;
  absl::StatusOr<SlicePlan> plan = SlicePlan::Create({{"w", 40}}, options);
  CATCH_REQUIRE(plan.ok());
  return *plan;
}

// Nothing arrives, so every wait ends at its bound whatever the machine's speed.
CATCH_TEST_CASE("a timed-out wait names the servers that owe values and whom they wait for") {
  const SlicePlan plan = TwoServerPlan();
  VersionTracker tracker(static_cast<int>(plan.slices().size()));
  for (const Slice& s : plan.slices()) {
    if (s.server == 0) tracker.MarkArrived(s.id, 19);  // only server 1 owes version 19
  }
  StallHints hints;
  hints.Note(/*server=*/1, /*iteration=*/18, {0});
  hints.Note(/*server=*/0, /*iteration=*/17, {1});  // over: not the iteration awaited
  ParameterWaits waits({.rank = 1,
                        .bound = absl::Milliseconds(20),
                        .stall_report = absl::ZeroDuration(),
                        .hints = &hints},
                       &tracker, {0, 1}, {"fc"});
  const absl::Status s = waits.WaitForAll(19, plan);
  CATCH_CAPTURE(s.message());
  CATCH_CHECK(absl::IsDeadlineExceeded(s));
  CATCH_CHECK(Contains(s.message(), "worker 1: waited 20ms for parameters: "));
  CATCH_CHECK(Contains(s.message(), "; missing: server 1's values of "));
  CATCH_CHECK_FALSE(Contains(s.message(), "server 0's values"));
  CATCH_CHECK(Contains(s.message(), "; the servers wait for the gradients of iteration 18 from "
                                    "worker 0 (server 1 says so)"));
  CATCH_CHECK_FALSE(Contains(s.message(), "from worker 1"));
}

CATCH_TEST_CASE("a timed-out wait without hints names only the servers that owe values") {
  const SlicePlan plan = TwoServerPlan();
  VersionTracker tracker(static_cast<int>(plan.slices().size()));
  ParameterWaits waits({.rank = 0, .bound = absl::Milliseconds(20),
                        .stall_report = absl::ZeroDuration()},
                       &tracker, {0, 1}, {"fc"});
  const absl::Status s = waits.WaitForAll(3, plan);
  CATCH_CAPTURE(s.message());
  CATCH_CHECK(absl::IsDeadlineExceeded(s));
  CATCH_CHECK(Contains(s.message(), "; missing: server 0's values of "));
  CATCH_CHECK(Contains(s.message(), "; server 1's values of "));
  CATCH_CHECK_FALSE(Contains(s.message(), "the servers wait"));
}

}  // namespace
}  // namespace p3
