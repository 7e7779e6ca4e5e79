// Replans (worker/replans.h): a worker's re-plans, requested, forwarded and switched to.
#include "worker/replans.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "p3/core/slice_plan.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"

namespace p3 {
namespace {

// Tensors of 10 and 3 values in ownership stripes of 8 over 2 servers, sliced 4 long.
SlicePlan StripedPlan(int64_t owner_params = 8) {
  SlicePlanOptions options;
  options.slice_params = 4;
  options.owner_params = owner_params;
  options.num_servers = 2;
  return *SlicePlan::Create({{"a", 10}, {"b", 3}}, options);
}

struct Fixture {
  explicit Fixture(int rank = 0, ReplansOptions options = {.num_servers = 2},
                   SlicePlan plan = StripedPlan())
      : params(13, 0.0f),
        grads(13, 0.0f),
        tracker(static_cast<int>(plan.slices().size())),
        core({.rank = rank, .num_servers = 2}, std::move(plan), params.data(), grads.data(),
             &tracker),
        replans([&] {
          options.rank = rank;
          return options;
        }(), &core) {}

  // Every slice of the current plan at `version`, as after a forward pass.
  void Arrive(uint64_t version) {
    const SlicePlan& plan = core.plan();
    for (const Slice& s : plan.slices()) {
      std::vector<float> v(s.length, 1.0f);
      CATCH_REQUIRE(core.Params(s.server, s.id, version, 0,
                                reinterpret_cast<const char*>(v.data()), v.size() * 4)
                        .ok());
    }
  }

  std::vector<float> params;
  std::vector<float> grads;
  VersionTracker tracker;
  WorkerCore core;
  Replans replans;
};

CATCH_TEST_CASE("rank 0's request is a Replan to every server from the next iteration") {
  Fixture f;
  absl::StatusOr<std::vector<ToServer>> ask = f.replans.Request(2, /*iteration=*/5);
  CATCH_REQUIRE(ask.ok());
  CATCH_REQUIRE(ask->size() == 2);
  for (int s = 0; s < 2; ++s) {
    CATCH_CHECK((*ask)[s].server == s);
    CATCH_CHECK((*ask)[s].message.kind == Upstream::Kind::kReplan);
    CATCH_CHECK((*ask)[s].message.from_iteration == 6);
    CATCH_CHECK((*ask)[s].message.slice_params == 2);
  }
  // Pending until iteration 6.
  CATCH_CHECK(absl::IsFailedPrecondition(f.replans.Request(3, 5).status()));
  CATCH_CHECK(f.replans.Request(3, 6).ok());
}

CATCH_TEST_CASE("a request the run cannot take is refused with the reason") {
  CATCH_CHECK(absl::IsFailedPrecondition(Fixture(/*rank=*/1).replans.Request(2, 0).status()));
  Fixture pulls(0, {.num_servers = 2, .values_on_push = false});
  CATCH_CHECK(absl::IsFailedPrecondition(pulls.replans.Request(2, 0).status()));
  Fixture half(0, {.num_servers = 2, .wire_dtype = WireDType::kFloat16});
  CATCH_CHECK(absl::IsFailedPrecondition(half.replans.Request(2, 0).status()));
  Fixture unstriped(0, {.num_servers = 2}, StripedPlan(/*owner_params=*/0));
  CATCH_CHECK(absl::IsFailedPrecondition(unstriped.replans.Request(2, 0).status()));
  Fixture f;
  CATCH_CHECK_FALSE(f.replans.Request(0, 0).ok());  // not a slice size
}

CATCH_TEST_CASE("a re-plan forwarded by every server switches the core at its iteration") {
  Fixture f(/*rank=*/1);
  CATCH_REQUIRE(f.core.Start({0, 0}).ok());
  CATCH_REQUIRE(f.replans.Forwarded(0, 2, 2).ok());
  CATCH_REQUIRE(f.replans.Forwarded(1, 2, 2).ok());
  CATCH_REQUIRE(f.replans.Forwarded(1, 2, 2).ok());  // told twice: once counts
  f.Arrive(1);
  CATCH_CHECK(f.replans.SwitchIfDue(1).value() == false);  // not yet
  f.Arrive(2);
  CATCH_CHECK(f.replans.SwitchIfDue(2).value() == true);
  CATCH_CHECK(f.core.plan().options().slice_params == 2);
  CATCH_CHECK(f.replans.count() == 1);
  CATCH_CHECK(f.replans.SwitchIfDue(3).value() == false);  // nothing more pending
}

CATCH_TEST_CASE("re-plans forwarded out of order, contradicting or incomplete fail the run") {
  Fixture f(/*rank=*/1);
  CATCH_REQUIRE(f.replans.Forwarded(0, 4, 2).ok());
  CATCH_CHECK(absl::IsInternal(f.replans.Forwarded(0, 3, 2)));  // before the one queued
  CATCH_CHECK(absl::IsInternal(f.replans.Forwarded(1, 4, 8)));  // another size
  CATCH_REQUIRE(f.core.Start({0, 0}).ok());
  f.Arrive(4);
  // Only server 0 forwarded it before its values: refused, naming the worker.
  const absl::Status incomplete = f.replans.SwitchIfDue(4).status();
  CATCH_CHECK(absl::IsInternal(incomplete));
  CATCH_CHECK(incomplete.message().find("worker 1: a re-plan from iteration 4 came from 1 of 2") !=
              std::string::npos);
  CATCH_CHECK(f.replans.count() == 0);
  // One that arrives after its iteration's values.
  Fixture late(/*rank=*/1);
  CATCH_REQUIRE(late.replans.Forwarded(0, 1, 2).ok());
  CATCH_REQUIRE(late.replans.Forwarded(1, 1, 2).ok());
  CATCH_CHECK(absl::IsInternal(late.replans.SwitchIfDue(3).status()));
}

}  // namespace
}  // namespace p3
