#include "p3/sim/fluid.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
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

CATCH_TEST_CASE("work added to a running job moves its finish, under either sharing") {
  for (Sharing sharing : {Sharing::kWaterFilling, Sharing::kEqualSplit}) {
    FluidScheduler fluid(sharing);
    const int cpu = fluid.AddResource(1.0);
    std::vector<double> done(2, -1);
    const int64_t a = fluid.Start(1.0, {{cpu, 1.0}}, kUnlimitedRate, [&] { done[0] = fluid.now(); });
    fluid.AdvanceTo(0.5);  // a: 0.5 left, alone at rate 1
    fluid.AddWork(a, 0.25);
    fluid.Start(0.5, {{cpu, 1.0}}, kUnlimitedRate, [&] { done[1] = fluid.now(); });
    // From 0.5 both at 1/2: b's 0.5 done at 1.5, a's 0.75 has 0.25 left, then alone.
    while (fluid.active() > 0) fluid.AdvanceTo(fluid.NextCompletion());
    CATCH_CHECK(done[1] == Approx(1.5));
    CATCH_CHECK(done[0] == Approx(1.75));
    fluid.AddWork(a, 1.0);  // no longer active: nothing happens
    CATCH_CHECK(fluid.active() == 0);
  }
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

// The equal split by its definition: every job's rate recomputed from scratch at every
// start and finish, all jobs advanced step by step.
struct NaiveJob {
  double start = 0;
  double work = 0;
  std::vector<Usage> uses;
  double max_rate = kUnlimitedRate;
};

std::vector<double> NaiveEqualSplit(const std::vector<double>& capacity,
                                    const std::vector<NaiveJob>& jobs) {
  std::vector<double> remaining(jobs.size()), finish(jobs.size(), -1);
  std::vector<bool> active(jobs.size(), false);
  double now = 0;
  size_t next_start = 0;  // jobs are sorted by start
  while (true) {
    while (next_start < jobs.size() && jobs[next_start].start <= now) {
      active[next_start] = true;
      remaining[next_start] = jobs[next_start].work;
      ++next_start;
    }
    std::vector<int> users(capacity.size(), 0);
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (!active[j]) continue;
      for (const Usage& u : jobs[j].uses) ++users[u.resource];
    }
    std::vector<double> rate(jobs.size(), 0);
    double step = next_start < jobs.size() ? jobs[next_start].start - now : kUnlimitedRate;
    bool any = false;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (!active[j]) continue;
      any = true;
      rate[j] = jobs[j].max_rate;
      for (const Usage& u : jobs[j].uses) {
        rate[j] = std::min(rate[j], capacity[u.resource] / (users[u.resource] * u.coef));
      }
      step = std::min(step, remaining[j] / rate[j]);
    }
    if (!any && next_start == jobs.size()) break;
    now += step;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (!active[j]) continue;
      remaining[j] -= rate[j] * step;
      if (remaining[j] <= 1e-9 * jobs[j].work) {
        active[j] = false;
        finish[j] = now;
      }
    }
  }
  return finish;
}

CATCH_TEST_CASE("equal split: incremental rates and finishes equal a from-scratch recomputation") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<double> capacity = {100.0, 250.0, 40.0, 1000.0};
    std::vector<NaiveJob> jobs(60);
    double t = 0;
    for (NaiveJob& job : jobs) {
      t += std::uniform_real_distribution<double>(0, 0.3)(rng);
      job.start = t;
      job.work = std::uniform_real_distribution<double>(1, 50)(rng);
      const int a = std::uniform_int_distribution<int>(0, 3)(rng);
      const int b = std::uniform_int_distribution<int>(0, 3)(rng);
      // One or two resources (possibly the same one twice, as a ring step's two CPUs
      // on one host), or none with a rate cap.
      const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
      if (kind == 0) {
        job.max_rate = 20;
      } else {
        job.uses.push_back({a, 1.0});
        if (kind >= 2) job.uses.push_back({b, kind == 3 ? 0.5 : 1.0});
        if (kind == 3) job.max_rate = 60;
      }
    }
    const std::vector<double> want = NaiveEqualSplit(capacity, jobs);
    FluidScheduler fluid(Sharing::kEqualSplit);
    for (double c : capacity) fluid.AddResource(c);
    std::vector<double> got(jobs.size(), -1);
    size_t next = 0;
    while (next < jobs.size() || fluid.active() > 0) {
      const double start = next < jobs.size() ? jobs[next].start : kUnlimitedRate;
      const double finish = fluid.NextCompletion();
      fluid.AdvanceTo(std::min(start, finish));
      while (next < jobs.size() && jobs[next].start <= fluid.now()) {
        const size_t j = next++;
        fluid.Start(jobs[j].work, jobs[j].uses, jobs[j].max_rate,
                    [&got, &fluid, j] { got[j] = fluid.now(); });
      }
    }
    for (size_t j = 0; j < jobs.size(); ++j) {
      CATCH_CHECK(got[j] == Approx(want[j]).epsilon(1e-9));
    }
  }
}

}  // namespace
}  // namespace p3::sim
