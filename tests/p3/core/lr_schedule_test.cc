// Learning-rate schedules (p3/core/lr_schedule.h) against hand-computed values and against
// PyTorch's schedulers as they step (the recursive "chainable" form of
// torch.optim.lr_scheduler in 1.13, written out below), per iteration.
#include "p3/core/lr_schedule.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

namespace p3 {
namespace {

constexpr double kPi = 3.14159265358979323846;

LrScheduleOptions Kind(LrScheduleKind kind) {
  LrScheduleOptions s;
  s.kind = kind;
  return s;
}

CATCH_TEST_CASE("constant keeps the base rate at every iteration") {
  const LrScheduleOptions s;
  for (int64_t t : {0, 1, 7, 100000}) CATCH_CHECK(ScheduledLr(s, 0.05, t) == 0.05);
}

CATCH_TEST_CASE("step multiplies by gamma every step_size iterations") {
  LrScheduleOptions s = Kind(LrScheduleKind::kStep);
  s.step_size = 3;
  s.gamma = 0.5;
  const std::vector<double> want = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025};
  for (size_t t = 0; t < want.size(); ++t) {
    CATCH_CAPTURE(t);
    CATCH_CHECK(ScheduledLr(s, 0.1, t) == Approx(want[t]).epsilon(1e-15));
  }
}

CATCH_TEST_CASE("multi-step multiplies by gamma at each milestone, the milestone included") {
  LrScheduleOptions s = Kind(LrScheduleKind::kMultiStep);
  s.milestones = {2, 5};
  s.gamma = 0.1;
  const std::vector<double> want = {1, 1, 0.1, 0.1, 0.1, 0.01, 0.01};
  for (size_t t = 0; t < want.size(); ++t) {
    CATCH_CAPTURE(t);
    CATCH_CHECK(ScheduledLr(s, 1.0, t) == Approx(want[t]).epsilon(1e-15));
  }
}

CATCH_TEST_CASE("exponential multiplies by gamma every iteration") {
  LrScheduleOptions s = Kind(LrScheduleKind::kExponential);
  s.gamma = 0.9;
  CATCH_CHECK(ScheduledLr(s, 1.0, 0) == 1.0);
  CATCH_CHECK(ScheduledLr(s, 1.0, 1) == Approx(0.9).epsilon(1e-15));
  CATCH_CHECK(ScheduledLr(s, 1.0, 3) == Approx(0.729).epsilon(1e-15));
}

CATCH_TEST_CASE("cosine anneals from the base rate to eta_min at t_max, and rises after it") {
  LrScheduleOptions s = Kind(LrScheduleKind::kCosine);
  s.t_max = 10;
  s.eta_min = 0.01;
  CATCH_CHECK(ScheduledLr(s, 0.1, 0) == Approx(0.1).epsilon(1e-15));
  CATCH_CHECK(ScheduledLr(s, 0.1, 5) == Approx(0.055).epsilon(1e-15));
  CATCH_CHECK(ScheduledLr(s, 0.1, 10) == Approx(0.01).epsilon(1e-15));
  // PyTorch's closed form is periodic in 2 * t_max.
  CATCH_CHECK(ScheduledLr(s, 0.1, 15) == Approx(0.055).epsilon(1e-15));
  CATCH_CHECK(ScheduledLr(s, 0.1, 20) == Approx(0.1).epsilon(1e-15));
  // (1 + cos(pi/10)) / 2 of the way from eta_min to the base rate.
  CATCH_CHECK(ScheduledLr(s, 0.1, 1) ==
              Approx(0.01 + 0.09 * (1 + std::cos(kPi / 10)) / 2).epsilon(1e-15));
}

CATCH_TEST_CASE("warm-up rises linearly from start_factor to 1, then leaves the rate alone") {
  LrScheduleOptions s;
  s.warmup_iterations = 4;
  s.warmup_start_factor = 0.25;
  const std::vector<double> want = {0.05, 0.0875, 0.125, 0.1625, 0.2, 0.2};
  for (size_t t = 0; t < want.size(); ++t) {
    CATCH_CAPTURE(t);
    CATCH_CHECK(ScheduledLr(s, 0.2, t) == Approx(want[t]).epsilon(1e-15));
  }
}

CATCH_TEST_CASE("warm-up multiplies the schedule of the same iteration") {
  LrScheduleOptions s = Kind(LrScheduleKind::kStep);
  s.step_size = 2;
  s.gamma = 0.5;
  s.warmup_iterations = 3;
  s.warmup_start_factor = 0.4;
  // t = 2: step gives 0.5, warm-up 0.4 + 0.6 * 2/3 = 0.8.
  CATCH_CHECK(ScheduledLr(s, 1.0, 0) == Approx(0.4).epsilon(1e-15));
  CATCH_CHECK(ScheduledLr(s, 1.0, 2) == Approx(0.4).epsilon(1e-15));
  CATCH_CHECK(ScheduledLr(s, 1.0, 3) == Approx(0.5).epsilon(1e-15));
}

// PyTorch 1.13's schedulers as they step (their get_lr(), not the closed form), chained
// as ChainedScheduler([LinearLR(start, 1, warmup), <main>]) chains them: each
// multiplies the rate the other left.
class PyTorchSteppedLr {
 public:
  PyTorchSteppedLr(const LrScheduleOptions& s, double base) : s_(s), base_(base), lr_(base) {
    // Both constructors step once (last_epoch 0).
    if (s_.warmup_iterations > 0) lr_ *= s_.warmup_start_factor;
  }
  double lr() const { return lr_; }

  void Step() {
    ++t_;
    // The main schedule first (as chained here), then LinearLR.
    switch (s_.kind) {
      case LrScheduleKind::kConstant:
        break;
      case LrScheduleKind::kStep:
        if (t_ % s_.step_size == 0) lr_ *= s_.gamma;
        break;
      case LrScheduleKind::kMultiStep:
        for (int64_t m : s_.milestones) {
          if (m == t_) lr_ *= s_.gamma;
        }
        break;
      case LrScheduleKind::kExponential:
        lr_ *= s_.gamma;
        break;
      case LrScheduleKind::kCosine: {
        const double tm = static_cast<double>(s_.t_max);
        if ((t_ - 1 - s_.t_max) % (2 * s_.t_max) == 0) {
          lr_ = lr_ + (base_ - s_.eta_min) * (1 - std::cos(kPi / tm)) / 2;
        } else {
          lr_ = (1 + std::cos(kPi * t_ / tm)) / (1 + std::cos(kPi * (t_ - 1) / tm)) *
                    (lr_ - s_.eta_min) +
                s_.eta_min;
        }
        break;
      }
    }
    const int64_t n = s_.warmup_iterations;
    if (n > 0 && t_ <= n) {
      const double start = s_.warmup_start_factor;
      lr_ *= 1 + (1 - start) / (n * start + (t_ - 1) * (1 - start));
    }
  }

 private:
  const LrScheduleOptions s_;
  const double base_;
  double lr_;
  int64_t t_ = 0;
};

CATCH_TEST_CASE("every schedule, with and without warm-up, follows PyTorch's schedulers") {
  std::vector<LrScheduleOptions> cases;
  LrScheduleOptions s = Kind(LrScheduleKind::kConstant);
  cases.push_back(s);
  s = Kind(LrScheduleKind::kStep);
  s.step_size = 7;
  s.gamma = 0.7;
  cases.push_back(s);
  s = Kind(LrScheduleKind::kMultiStep);
  s.milestones = {5, 30, 31, 90};
  s.gamma = 0.3;
  cases.push_back(s);
  s = Kind(LrScheduleKind::kExponential);
  s.gamma = 0.98;
  cases.push_back(s);
  s = Kind(LrScheduleKind::kCosine);
  s.t_max = 40;  // past t_max too: the run below is longer
  cases.push_back(s);
  const size_t plain = cases.size();
  for (size_t i = 0; i < plain; ++i) {
    LrScheduleOptions warm = cases[i];
    warm.warmup_iterations = 12;
    warm.warmup_start_factor = 0.1;
    cases.push_back(warm);
  }
  for (const LrScheduleOptions& c : cases) {
    CATCH_CAPTURE(LrScheduleName(c.kind), c.warmup_iterations);
    PyTorchSteppedLr theirs(c, 0.05);
    double worst = 0;
    for (int64_t t = 0; t < 100; ++t) {
      const double ours = ScheduledLr(c, 0.05, t);
      worst = std::max(worst, std::abs(ours - theirs.lr()) / theirs.lr());
      theirs.Step();
    }
    CATCH_CHECK(worst < 1e-12);
  }
}

CATCH_TEST_CASE("cosine with eta_min follows PyTorch's CosineAnnealingLR") {
  LrScheduleOptions s = Kind(LrScheduleKind::kCosine);
  s.t_max = 25;
  s.eta_min = 0.001;
  PyTorchSteppedLr theirs(s, 0.05);
  for (int64_t t = 0; t < 80; ++t) {
    CATCH_CAPTURE(t);
    CATCH_CHECK(ScheduledLr(s, 0.05, t) == Approx(theirs.lr()).epsilon(1e-12));
    theirs.Step();
  }
}

std::string Errors(const LrScheduleOptions& s) {
  return std::string(ValidateLrSchedule(s).message());
}

CATCH_TEST_CASE("validation names every bad field and refuses fields the kind does not use") {
  CATCH_CHECK(ValidateLrSchedule(LrScheduleOptions()).ok());
  LrScheduleOptions s = Kind(LrScheduleKind::kStep);
  CATCH_CHECK(Errors(s) ==
              "optimizer.schedule.step_size: 0 is out of range; allowed >= 1 for \"step\"");
  s.step_size = 5;
  s.gamma = -1;
  CATCH_CHECK(Errors(s) == "optimizer.schedule.gamma: -1 is out of range; allowed > 0 (finite)");

  s = Kind(LrScheduleKind::kMultiStep);
  CATCH_CHECK(Errors(s) ==
              "optimizer.schedule.milestones: at least one is required for \"multi_step\"");
  s.milestones = {3, 3};
  CATCH_CHECK(Errors(s) ==
              "optimizer.schedule.milestones: [3, 3] is not allowed; allowed: strictly "
              "increasing, each >= 1");

  s = Kind(LrScheduleKind::kCosine);
  s.eta_min = -0.5;
  s.step_size = 4;
  s.warmup_iterations = -1;
  s.warmup_start_factor = 0;
  CATCH_CHECK(Errors(s) ==
              "optimizer.schedule.step_size: used only by \"step\"; the schedule is \"cosine\"\n"
              "optimizer.schedule.t_max: 0 is out of range; allowed >= 1 for \"cosine\"\n"
              "optimizer.schedule.eta_min: -0.5 is out of range; allowed >= 0 (finite)\n"
              "optimizer.schedule.warmup_iterations: -1 is out of range; allowed >= 0\n"
              "optimizer.schedule.warmup_start_factor: 0 is out of range; allowed (0, 1]");

  s = Kind(LrScheduleKind::kExponential);
  s.milestones = {1};
  s.t_max = 3;
  CATCH_CHECK(Errors(s) ==
              "optimizer.schedule.milestones: used only by \"multi_step\"; the schedule is "
              "\"exponential\"\n"
              "optimizer.schedule.t_max: used only by \"cosine\"; the schedule is \"exponential\"");
}

CATCH_TEST_CASE("an invalid schedule gives the base rate instead of dividing by zero") {
  LrScheduleOptions s = Kind(LrScheduleKind::kCosine);  // t_max 0
  CATCH_CHECK(ScheduledLr(s, 0.05, 3) == 0.05);
  s = Kind(LrScheduleKind::kStep);  // step_size 0
  CATCH_CHECK(ScheduledLr(s, 0.05, 3) == 0.05);
}

}  // namespace
}  // namespace p3
