#include "p3/core/stall_report.h"

#include <string>

#include <catch2/catch.hpp>

#include "p3/core/parameter_shard.h"

namespace p3 {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const absl::Time t0 = absl::FromUnixSeconds(1000);

CATCH_TEST_CASE("a wait is reported once it has lasted stall_report, naming the missing ranks") {
  GradientStallWatch watch(/*server_index=*/1, absl::Seconds(10));
  const std::vector<SliceWait> waits = {{.slice_id = 3, .iteration = 7, .missing_ranks = {2}},
                                        {.slice_id = 5, .iteration = 7, .missing_ranks = {0, 2}}};
  CATCH_CHECK_FALSE(watch.Observe(waits, t0).has_value());
  CATCH_CHECK_FALSE(watch.Observe(waits, t0 + absl::Seconds(9)).has_value());
  std::optional<StallReport> report = watch.Observe(waits, t0 + absl::Seconds(10));
  CATCH_REQUIRE(report.has_value());
  CATCH_CHECK(report->iteration == 7);
  CATCH_CHECK(report->missing_ranks == std::vector<int>{0, 2});
  CATCH_CHECK(report->waited == absl::Seconds(10));
  CATCH_CAPTURE(report->text);
  CATCH_CHECK(Contains(report->text, "[stall] server 1: waited 10s for the gradients of iteration 7"));
  CATCH_CHECK(Contains(report->text, "worker 0 (1 slice: 5)"));
  CATCH_CHECK(Contains(report->text, "worker 2 (2 slices: 3, 5)"));
}

CATCH_TEST_CASE("only the oldest iteration's missing gradients are reported") {
  GradientStallWatch watch(0, absl::Seconds(10));
  // Slice 0 waits for worker 1's gradient of iteration 4; slice 1 already got both of 4
  // and waits for iteration 5 from everyone, who cannot start it without slice 0.
  const std::vector<SliceWait> waits = {{.slice_id = 0, .iteration = 4, .missing_ranks = {1}},
                                        {.slice_id = 1, .iteration = 5, .missing_ranks = {0, 1}}};
  watch.Observe(waits, t0);
  std::optional<StallReport> report = watch.Observe(waits, t0 + absl::Seconds(10));
  CATCH_REQUIRE(report.has_value());
  CATCH_CAPTURE(report->text);
  CATCH_CHECK(report->iteration == 4);
  CATCH_CHECK(report->missing_ranks == std::vector<int>{1});
  CATCH_CHECK(Contains(report->text, "iteration 4: worker 1 (1 slice: 0)"));
}

CATCH_TEST_CASE("a lasting wait is reported again every stall_report, not at every look") {
  GradientStallWatch watch(0, absl::Seconds(10));
  const std::vector<SliceWait> waits = {{.slice_id = 0, .iteration = 1, .missing_ranks = {1}}};
  watch.Observe(waits, t0);
  CATCH_CHECK(watch.Observe(waits, t0 + absl::Seconds(10)).has_value());
  CATCH_CHECK_FALSE(watch.Observe(waits, t0 + absl::Seconds(15)).has_value());
  std::optional<StallReport> again = watch.Observe(waits, t0 + absl::Seconds(20));
  CATCH_REQUIRE(again.has_value());
  CATCH_CHECK(again->waited == absl::Seconds(20));
}

CATCH_TEST_CASE("a slice that moves on to the next iteration starts its wait afresh") {
  GradientStallWatch watch(0, absl::Seconds(10));
  watch.Observe({{.slice_id = 0, .iteration = 1, .missing_ranks = {1}}}, t0);
  // Iteration 2 is awaited from t0 + 8 s on: not yet 10 s at t0 + 12 s.
  const std::vector<SliceWait> next = {{.slice_id = 0, .iteration = 2, .missing_ranks = {1}}};
  CATCH_CHECK_FALSE(watch.Observe(next, t0 + absl::Seconds(8)).has_value());
  CATCH_CHECK_FALSE(watch.Observe(next, t0 + absl::Seconds(12)).has_value());
  CATCH_CHECK(watch.Observe(next, t0 + absl::Seconds(18)).has_value());
  // Nothing missing: nothing to report.
  CATCH_CHECK_FALSE(watch.Observe({}, t0 + absl::Seconds(40)).has_value());
}

CATCH_TEST_CASE("a worker's wait names each server with the slices it still owes") {
  SlicePlanOptions options;
  options.granularity = Granularity::kSliced;
  options.slice_params = 10;
  options.num_servers = 2;
  absl::StatusOr<SlicePlan> plan = SlicePlan::Create({{"w", 40}}, options);
  CATCH_REQUIRE(plan.ok());
  std::vector<int> of_server_1;
  for (const Slice& s : plan->slices()) {
    if (s.server == 1) of_server_1.push_back(s.id);
  }
  CATCH_REQUIRE_FALSE(of_server_1.empty());
  const std::string text =
      DescribeValueWait(3, absl::Seconds(12), 5, "block 2 (fc)", of_server_1, *plan);
  CATCH_CAPTURE(text);
  CATCH_CHECK(Contains(text, "[stall] worker 3: waited 12s for version 5 of block 2 (fc): "));
  CATCH_CHECK(Contains(text, "server 1's values of"));
  CATCH_CHECK_FALSE(Contains(text, "server 0"));
  CATCH_CHECK(ListIds({1, 2, 3}, 2) == "1, 2, ... (3 in all)");
}

CATCH_TEST_CASE("stall hints name the ranks the servers wait for at one iteration only") {
  StallHints hints;
  CATCH_CHECK(hints.Describe(18).empty());
  hints.Note(/*server=*/1, /*iteration=*/18, {0});
  CATCH_CHECK(hints.Describe(18) ==
              "the servers wait for the gradients of iteration 18 from worker 0 (server 1 says so)");
  hints.Note(0, 18, {0, 2});
  CATCH_CHECK(hints.Describe(18) == "the servers wait for the gradients of iteration 18 from "
                                    "workers 0, 2 (server 0, server 1 say so)");
  // A server's newer hint replaces its older one; hints of another iteration are over.
  hints.Note(0, 19, {2});
  CATCH_CHECK(hints.Describe(18) ==
              "the servers wait for the gradients of iteration 18 from worker 0 (server 1 says so)");
  CATCH_CHECK(hints.Describe(17).empty());
  hints.Note(1, 19, {});
  CATCH_CHECK(hints.Describe(19) ==
              "the servers wait for the gradients of iteration 19 from worker 2 (server 0 says so)");
}

CATCH_TEST_CASE("values owed are grouped by the server that owns them") {
  SlicePlanOptions options;
  options.granularity = Granularity::kSliced;
  options.slice_params = 10;
  options.num_servers = 2;
  absl::StatusOr<SlicePlan> plan = SlicePlan::Create({{"w", 40}}, options);
  CATCH_REQUIRE(plan.ok());
  std::vector<int> all;
  for (const Slice& s : plan->slices()) all.push_back(s.id);
  const std::string text = DescribeValuesOwed(all, *plan);
  CATCH_CAPTURE(text);
  CATCH_CHECK(text.rfind("server 0's values of ", 0) == 0);
  CATCH_CHECK(Contains(text, "; server 1's values of "));
  CATCH_CHECK(DescribeValuesOwed({}, *plan).empty());
  CATCH_CHECK(DescribeValuesOwed({99}, *plan).empty());  // not in the plan
}

CATCH_TEST_CASE("the shard's waits list the ranks whose gradients of a slice are missing") {
  ShardOptions options;
  options.num_workers = 3;
  ParameterShard shard(options);
  ClusterSignature sig;
  sig.num_workers = 3;
  sig.num_servers = 1;
  sig.tensors = {{"w", {4}, "float32"}};
  sig.plan.granularity = Granularity::kTensor;
  CATCH_CHECK(shard.Waits().empty());  // nothing joined yet
  for (int r = 0; r < 3; ++r) CATCH_REQUIRE(shard.Join(sig, r).ok());
  const std::vector<float> values = {1, 2, 3, 4};
  CATCH_CHECK(shard.Waits().empty());  // not initialised yet: nothing awaited
  CATCH_REQUIRE(shard.Init(0, 0, values.data(), 4).ok());
  CATCH_REQUIRE(shard.Gradient(1, 0, 0, values.data(), 4).ok());
  std::vector<SliceWait> waits = shard.Waits();
  CATCH_REQUIRE(waits.size() == 1);
  CATCH_CHECK(waits[0].iteration == 0);
  CATCH_CHECK(waits[0].missing_ranks == std::vector<int>{0, 2});
  shard.Finish(2);  // a finished worker is not awaited
  waits = shard.Waits();
  CATCH_REQUIRE(waits.size() == 1);
  CATCH_CHECK(waits[0].missing_ranks == std::vector<int>{0});
}

}  // namespace
}  // namespace p3
