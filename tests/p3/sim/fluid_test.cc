#include "p3/sim/fluid.h"

#include <catch2/catch.hpp>
#include <vector>

namespace p3::sim {
namespace {

CATCH_TEST_CASE("one job on one link takes work / capacity") {
  FluidScheduler fluid;
  const int link = fluid.AddResource(1000.0);
  double finished = -1;
  fluid.Start(250.0, {{link, 1.0}}, kUnlimitedRate, [&] { finished = fluid.now(); });
  while (fluid.active() > 0) fluid.AdvanceTo(fluid.NextCompletion());
  CATCH_CHECK(finished == Approx(0.25));
}

CATCH_TEST_CASE("two jobs on one link share it equally, then the survivor gets all of it") {
  FluidScheduler fluid;
  const int link = fluid.AddResource(100.0);
  std::vector<double> done(2, -1);
  fluid.Start(100.0, {{link, 1.0}}, kUnlimitedRate, [&] { done[0] = fluid.now(); });
  fluid.Start(50.0, {{link, 1.0}}, kUnlimitedRate, [&] { done[1] = fluid.now(); });
  while (fluid.active() > 0) fluid.AdvanceTo(fluid.NextCompletion());
  CATCH_CHECK(done[1] == Approx(1.0));  // 50 at 50/s
  CATCH_CHECK(done[0] == Approx(1.5));  // 50 at 50/s, then 50 at 100/s
}

CATCH_TEST_CASE("a job limited by another resource leaves its unused share to the others") {
  FluidScheduler fluid;
  const int wide = fluid.AddResource(10.0);
  const int narrow = fluid.AddResource(2.0);
  const int64_t a = fluid.Start(100.0, {{wide, 1.0}, {narrow, 1.0}}, kUnlimitedRate, nullptr);
  const int64_t b = fluid.Start(100.0, {{wide, 1.0}}, kUnlimitedRate, nullptr);
  CATCH_CHECK(fluid.Rate(a) == Approx(2.0));
  CATCH_CHECK(fluid.Rate(b) == Approx(8.0));
  CATCH_CHECK(fluid.Load(wide) == Approx(10.0));
}

CATCH_TEST_CASE("a compute job takes at most one core; CPU-heavy transfers share the rest") {
  FluidScheduler fluid;
  const int cpu = fluid.AddResource(2.0);  // two cores
  // Compute: one core at most. A transfer needing 1e-9 core-s per byte.
  const int64_t compute = fluid.Start(1.0, {{cpu, 1.0}}, 1.0, nullptr);
  const int64_t transfer = fluid.Start(1e9, {{cpu, 1e-9}}, kUnlimitedRate, nullptr);
  CATCH_CHECK(fluid.Rate(compute) == Approx(1.0));
  CATCH_CHECK(fluid.Rate(transfer) == Approx(1e9));  // the other core
  // A third CPU job: three threads on two cores, 2/3 of a core each.
  const int64_t other = fluid.Start(1.0, {{cpu, 1.0}}, 1.0, nullptr);
  CATCH_CHECK(fluid.Rate(compute) == Approx(2.0 / 3));
  CATCH_CHECK(fluid.Rate(other) == Approx(2.0 / 3));
  CATCH_CHECK(fluid.Rate(transfer) == Approx(2.0 / 3 * 1e9));
}

CATCH_TEST_CASE("equal split: the same shares, but a job limited elsewhere keeps its share") {
  FluidScheduler fluid(Sharing::kEqualSplit);
  const int wide = fluid.AddResource(10.0);
  const int narrow = fluid.AddResource(2.0);
  const int64_t a = fluid.Start(100.0, {{wide, 1.0}, {narrow, 1.0}}, kUnlimitedRate, nullptr);
  const int64_t b = fluid.Start(100.0, {{wide, 1.0}}, kUnlimitedRate, nullptr);
  CATCH_CHECK(fluid.Rate(a) == Approx(2.0));
  CATCH_CHECK(fluid.Rate(b) == Approx(5.0));  // water-filling would give it 8
  std::vector<double> done(2, -1);
  FluidScheduler two(Sharing::kEqualSplit);
  const int link = two.AddResource(100.0);
  two.Start(100.0, {{link, 1.0}}, kUnlimitedRate, [&] { done[0] = two.now(); });
  two.Start(50.0, {{link, 1.0}}, kUnlimitedRate, [&] { done[1] = two.now(); });
  while (two.active() > 0) two.AdvanceTo(two.NextCompletion());
  CATCH_CHECK(done[1] == Approx(1.0));
  CATCH_CHECK(done[0] == Approx(1.5));  // the survivor's rate was recomputed
}

}  // namespace
}  // namespace p3::sim
