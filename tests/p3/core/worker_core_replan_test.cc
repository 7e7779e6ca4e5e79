// WorkerCore and re-plans: a re-plan takes effect with every slice at its iteration, and a
// rejoining worker takes the plan the servers have in force (TakePlan).
#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "p3/core/slice_plan.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"
#include "tests/p3/core/worker_core_test_util.h"

namespace p3 {
namespace {

using worker_core_test::Fixture;
using worker_core_test::Mentions;
using worker_core_test::TestPlan;

// The plan of TestPlan() in ownership stripes of 8, sliced `slice` long: stripes a[0,8) ->
// server 0, a[8,10) -> server 1, b[0,3) -> server 0.
SlicePlan StripedPlan(int64_t slice) {
  SlicePlanOptions options;
  options.slice_params = slice;
  options.owner_params = 8;
  options.num_servers = 2;
  return *SlicePlan::Create({{"a", 10}, {"b", 3}}, options);
}

CATCH_TEST_CASE("a re-plan takes effect only with every slice at its iteration, and then uses the new slices") {
  SlicePlan plan = StripedPlan(4);
  SlicePlan next = StripedPlan(2);
  std::vector<float> params(13, 0.0f), grads(13, 0.0f);
  for (int i = 0; i < 13; ++i) grads[i] = static_cast<float>(i);
  VersionTracker tracker(static_cast<int>(plan.slices().size()));
  WorkerCore core({.rank = 1, .num_servers = 2}, plan, params.data(), grads.data(), &tracker);
  CATCH_CHECK(absl::IsFailedPrecondition(core.Replan(next, 0)));  // before the handshake
  CATCH_REQUIRE(core.Start({0, 0}).ok());
  // Version 0 of every slice but the last.
  auto give = [&](const SlicePlan& p, int id, uint64_t version) {
    const Slice& s = p.slices()[id];
    std::vector<float> v(s.length, static_cast<float>(version));
    return core.Params(s.server, id, version, 0, reinterpret_cast<const char*>(v.data()),
                       v.size() * sizeof(float));
  };
  for (int id = 0; id + 1 < static_cast<int>(plan.slices().size()); ++id) {
    CATCH_REQUIRE(give(plan, id, 0).ok());
  }
  absl::Status early = core.Replan(next, 0);
  CATCH_CHECK(absl::IsFailedPrecondition(early));
  CATCH_CHECK(early.message().find("holds no version") != std::string::npos);
  CATCH_REQUIRE(give(plan, static_cast<int>(plan.slices().size()) - 1, 0).ok());
  // Another model or other stripes are refused.
  SlicePlanOptions plain;
  plain.slice_params = 2;
  plain.num_servers = 2;
  SlicePlan unstriped = *SlicePlan::Create({{"a", 10}, {"b", 3}}, plain);
  CATCH_CHECK(absl::IsInvalidArgument(core.Replan(unstriped, 0)));
  const SlicePlan& before = core.plan();
  CATCH_REQUIRE(core.Replan(next, 0).ok());
  CATCH_CHECK(core.plan().options().slice_params == 2);
  CATCH_CHECK(core.plan().slices().size() == next.slices().size());
  // The replaced plan is still there for whoever holds it.
  CATCH_CHECK(before.options().slice_params == 4);
  CATCH_CHECK(before.slices().size() == plan.slices().size());
  CATCH_CHECK(tracker.Missing(0, static_cast<int>(next.slices().size()), 0) == 0);
  // Gradients now describe the new slices: slice 1 is a[2,4) on server 0.
  absl::StatusOr<ToServer> g = core.Gradient(1, 0);
  CATCH_REQUIRE(g.ok());
  CATCH_CHECK(g->server == 0);
  CATCH_CHECK(g->message.values == grads.data() + 2);
  CATCH_CHECK(g->message.length == 2);
  CATCH_CHECK(g->message.values[0] == 2.0f);
  // Version 1 of a new slice, and a value of the old plan's slice 2 (a[8,10), server 1)
  // under its old id: now a[4,6) of server 0, so server 1 sending it is refused.
  CATCH_CHECK(give(next, 1, 1).ok());
  std::vector<float> two(2, 5.0f);
  CATCH_CHECK(!core.Params(1, 2, 1, 0, reinterpret_cast<const char*>(two.data()), 8).ok());
}

CATCH_TEST_CASE(
    "a worker takes the plan the servers name before it starts or resumes, and refuses one "
    "that took effect after its iteration") {
  SlicePlan plan = StripedPlan(4);
  std::vector<float> params(13, 0.0f), grads(13, 0.0f);
  {
    // The servers re-planned to slices of 2 at iteration 3; the worker resumes at 5.
    VersionTracker tracker(static_cast<int>(plan.slices().size()));
    WorkerCore core({.rank = 1, .num_servers = 2}, plan, params.data(), grads.data(), &tracker);
    const PlanInForce two{.from_iteration = 3, .slice_params = 2};
    CATCH_REQUIRE(core.TakePlan({5, 6}, {two, two}).ok());
    CATCH_CHECK(core.plan().options().slice_params == 2);
    CATCH_CHECK(core.plan().slices().size() == StripedPlan(2).slices().size());
    CATCH_CHECK(!tracker.Version(0).has_value());  // nothing held yet
    CATCH_REQUIRE(core.Resume({5, 6}, {true, true}).ok());
    absl::StatusOr<ToServer> g = core.Gradient(1, 5);  // a[2,4) on server 0
    CATCH_REQUIRE(g.ok());
    CATCH_CHECK(g->message.values == grads.data() + 2);
    CATCH_CHECK(g->message.length == 2);
    CATCH_CHECK(absl::IsFailedPrecondition(core.TakePlan({5, 5}, {two, two})));  // started
  }
  {
    // The config's plan everywhere, or a server without slices naming another: unchanged.
    VersionTracker tracker(static_cast<int>(plan.slices().size()));
    WorkerCore core({.rank = 1, .num_servers = 2}, plan, params.data(), grads.data(), &tracker);
    CATCH_REQUIRE(core.TakePlan({4, UINT64_MAX}, {{}, {.from_iteration = 9, .slice_params = 1}}).ok());
    CATCH_CHECK(core.plan().options().slice_params == 4);
  }
  {
    // Server 0 switched at 3, server 1 still holds slices at 2: the worker would resume at
    // 2, which server 0 can no longer give in the old plan.
    VersionTracker tracker(static_cast<int>(plan.slices().size()));
    WorkerCore core({.rank = 1, .num_servers = 2}, plan, params.data(), grads.data(), &tracker);
    absl::Status late = core.TakePlan({3, 2}, {{.from_iteration = 3, .slice_params = 2}, {}});
    CATCH_CHECK(absl::IsFailedPrecondition(late));
    CATCH_CHECK(late.message().find("server 0 re-planned its slices to 2 from iteration 3") !=
                std::string::npos);
    CATCH_CHECK(core.plan().options().slice_params == 4);
    absl::Status differ = core.TakePlan(
        {3, 3}, {{.from_iteration = 3, .slice_params = 2}, {.from_iteration = 2, .slice_params = 1}});
    CATCH_CHECK(differ.message().find("different plans") != std::string::npos);
    CATCH_REQUIRE(core.Start({0, 0}).ok());
  }
}

}  // namespace
}  // namespace p3
