// Learning-rate schedules: the learning rate of iteration t from the base rate and a
// schedule, as PyTorch's torch.optim.lr_scheduler computes it in closed form.
//
// Schedules step per ITERATION (one update of the parameters), not per epoch: every
// length below is in iterations. A PyTorch schedule stepped per epoch is the same
// schedule with its lengths multiplied by the iterations per epoch (for example
// StepLR(step_size=2) per epoch at 937 iterations per epoch is step_size 1874 here).
//
// The servers (p3::ParameterShard, through SliceOptimizer), the `local` mode (worker/
// trainer.cc, on libtorch's optimizer) and the pipeline's stage optimizers all take the
// rate of iteration t from ScheduledLr(), computed in double the same way everywhere,
// so the three agree bit for bit on the rate. The rate depends only on the iteration,
// so a run restored from a checkpoint at iteration t continues with the rate of t.
//
// Example (a linear warm-up over 100 iterations from lr/10, then cosine to 0 over
// 1000 iterations):
//   LrScheduleOptions s;
//   s.kind = LrScheduleKind::kCosine;
//   s.t_max = 1000;
//   s.warmup_iterations = 100;
//   s.warmup_start_factor = 0.1;
//   double lr = ScheduledLr(s, /*base_lr=*/0.05, /*iteration=*/t);
//
// Plain values and free functions: thread-safe.
#ifndef P3_P3_CORE_LR_SCHEDULE_H_
#define P3_P3_CORE_LR_SCHEDULE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace p3 {

enum class LrScheduleKind { kConstant, kStep, kMultiStep, kExponential, kCosine };

// The names used by configs (optimizer.schedule.name), in the order of LrScheduleKind.
inline constexpr std::array<const char*, 5> kLrScheduleNames = {"constant", "step", "multi_step",
                                                                "exponential", "cosine"};

struct LrScheduleOptions {
  // Default: constant (the base rate at every iteration).
  LrScheduleKind kind = LrScheduleKind::kConstant;
  // kStep: multiply by gamma every step_size iterations (PyTorch's StepLR):
  //   lr = base * gamma^floor(t / step_size). Default: 0 (unset; >= 1 required for kStep).
  int64_t step_size = 0;
  // kMultiStep: multiply by gamma at each milestone (PyTorch's MultiStepLR):
  //   lr = base * gamma^(number of milestones <= t). Strictly increasing, each >= 1.
  //   Default: none (at least one required for kMultiStep).
  std::vector<int64_t> milestones;
  // kStep, kMultiStep, kExponential (lr = base * gamma^t, PyTorch's ExponentialLR).
  // Default: 0.1 (PyTorch's for StepLR and MultiStepLR).
  double gamma = 0.1;
  // kCosine (PyTorch's CosineAnnealingLR, closed form):
  //   lr = eta_min + (base - eta_min) * (1 + cos(pi * t / t_max)) / 2.
  // Past t_max the cosine rises again, as PyTorch's closed form does; set t_max to the
  // run's length to anneal once. Default: 0 (unset; >= 1 required for kCosine).
  int64_t t_max = 0;
  // kCosine: the floor of the rate (absolute, not a factor). Default: 0.
  double eta_min = 0;
  // Linear warm-up, composed with any kind by multiplication (PyTorch's LinearLR with
  // end_factor 1 chained with the schedule above): the rate of iteration t is multiplied
  //   by start + (1 - start) * t / warmup_iterations  for t < warmup_iterations,
  //   and by 1 afterwards.
  // 0 iterations: no warm-up. Default: 0.
  int64_t warmup_iterations = 0;
  // The warm-up's factor at iteration 0, in (0, 1]. Default: 1/3 (PyTorch's LinearLR).
  double warmup_start_factor = 1.0 / 3.0;
};

// The learning rate of `iteration` (0 for the first update). No allocation.
double ScheduledLr(const LrScheduleOptions& schedule, double base_lr, int64_t iteration);

// Checks the fields the kind uses and refuses fields it does not use (a value set for
// another kind is most likely a mistake). InvalidArgument with one line per bad field,
// each naming it, e.g.
//   optimizer.schedule.step_size: 0 is out of range; allowed >= 1 for "step"
absl::Status ValidateLrSchedule(const LrScheduleOptions& schedule);

// "constant", "step", ... (kLrScheduleNames).
const char* LrScheduleName(LrScheduleKind kind);

}  // namespace p3

#endif  // P3_P3_CORE_LR_SCHEDULE_H_
