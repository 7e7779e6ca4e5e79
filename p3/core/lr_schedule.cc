#include "p3/core/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3 {

namespace {

constexpr double kPi = 3.14159265358979323846;

// The schedule's factor or rate before the warm-up.
double MainLr(const LrScheduleOptions& s, double base_lr, int64_t t) {
  switch (s.kind) {
    case LrScheduleKind::kConstant:
      return base_lr;
    case LrScheduleKind::kStep:
      return base_lr * std::pow(s.gamma, static_cast<double>(t / s.step_size));
    case LrScheduleKind::kMultiStep: {
      // bisect_right: the milestones at or before t.
      const auto passed =
          std::upper_bound(s.milestones.begin(), s.milestones.end(), t) - s.milestones.begin();
      return base_lr * std::pow(s.gamma, static_cast<double>(passed));
    }
    case LrScheduleKind::kExponential:
      return base_lr * std::pow(s.gamma, static_cast<double>(t));
    case LrScheduleKind::kCosine:
      return s.eta_min +
             (base_lr - s.eta_min) *
                 (1 + std::cos(kPi * static_cast<double>(t) / static_cast<double>(s.t_max))) / 2;
  }
  return base_lr;
}

}  // namespace

double ScheduledLr(const LrScheduleOptions& s, double base_lr, int64_t iteration) {
  const int64_t t = std::max<int64_t>(0, iteration);
  // A schedule that failed validation must not divide by zero: the base rate.
  if ((s.kind == LrScheduleKind::kStep && s.step_size < 1) ||
      (s.kind == LrScheduleKind::kCosine && s.t_max < 1)) {
    return base_lr;
  }
  double lr = MainLr(s, base_lr, t);
  if (t < s.warmup_iterations) {
    const double factor = s.warmup_start_factor + (1 - s.warmup_start_factor) *
                                                      static_cast<double>(t) /
                                                      static_cast<double>(s.warmup_iterations);
    lr *= factor;
  }
  return lr;
}

const char* LrScheduleName(LrScheduleKind kind) {
  return kLrScheduleNames[static_cast<size_t>(kind)];
}

absl::Status ValidateLrSchedule(const LrScheduleOptions& s) {
  std::vector<std::string> errors;
  const std::string kind = absl::StrCat("\"", LrScheduleName(s.kind), "\"");
  auto unused = [&](const char* field, const char* used_by) {
    errors.push_back(absl::StrCat("optimizer.schedule.", field, ": used only by ", used_by,
                                  "; the schedule is ", kind));
  };
  if (s.kind == LrScheduleKind::kStep) {
    if (s.step_size < 1) {
      errors.push_back(absl::StrCat("optimizer.schedule.step_size: ", s.step_size,
                                    " is out of range; allowed >= 1 for \"step\""));
    }
  } else if (s.step_size != 0) {
    unused("step_size", "\"step\"");
  }
  if (s.kind == LrScheduleKind::kMultiStep) {
    if (s.milestones.empty()) {
      errors.push_back(
          "optimizer.schedule.milestones: at least one is required for \"multi_step\"");
    }
    for (size_t i = 0; i < s.milestones.size(); ++i) {
      if (s.milestones[i] < 1 || (i > 0 && s.milestones[i] <= s.milestones[i - 1])) {
        errors.push_back(absl::StrCat("optimizer.schedule.milestones: [",
                                      absl::StrJoin(s.milestones, ", "),
                                      "] is not allowed; allowed: strictly increasing, each >= 1"));
        break;
      }
    }
  } else if (!s.milestones.empty()) {
    unused("milestones", "\"multi_step\"");
  }
  if (s.kind == LrScheduleKind::kStep || s.kind == LrScheduleKind::kMultiStep ||
      s.kind == LrScheduleKind::kExponential) {
    if (!(s.gamma > 0) || !std::isfinite(s.gamma)) {
      errors.push_back(absl::StrCat("optimizer.schedule.gamma: ", s.gamma,
                                    " is out of range; allowed > 0 (finite)"));
    }
  }
  if (s.kind == LrScheduleKind::kCosine) {
    if (s.t_max < 1) {
      errors.push_back(absl::StrCat("optimizer.schedule.t_max: ", s.t_max,
                                    " is out of range; allowed >= 1 for \"cosine\""));
    }
    if (!(s.eta_min >= 0) || !std::isfinite(s.eta_min)) {
      errors.push_back(absl::StrCat("optimizer.schedule.eta_min: ", s.eta_min,
                                    " is out of range; allowed >= 0 (finite)"));
    }
  } else {
    if (s.t_max != 0) unused("t_max", "\"cosine\"");
    if (s.eta_min != 0) unused("eta_min", "\"cosine\"");
  }
  if (s.warmup_iterations < 0) {
    errors.push_back(absl::StrCat("optimizer.schedule.warmup_iterations: ", s.warmup_iterations,
                                  " is out of range; allowed >= 0"));
  }
  if (!(s.warmup_start_factor > 0 && s.warmup_start_factor <= 1)) {
    errors.push_back(absl::StrCat("optimizer.schedule.warmup_start_factor: ", s.warmup_start_factor,
                                  " is out of range; allowed (0, 1]"));
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

}  // namespace p3
