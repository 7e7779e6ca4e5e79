// Where a pipeline stage's thread spends its time: each stretch of work is charged to one
// kind (forward, backward, update, weights, wait) and, when a trace is recorded, becomes
// an event on the stage's track of the Chrome trace (p3/base/trace.h), so that one can see per
// stage what overlaps and what waits. The thread's CPU time over the whole Train() call
// is measured too: on a machine where the stages compete for cores, CPU time below the
// busy wall-clock time is time the thread was ready but had no core.
//
// Example (on stage k's thread):
//   StageTimer timer(options.trace, "stage 1", &stats.stage_times[1]);
//   ... pop the next message ...
//   timer.Lap(WorkKind::kWait, "wait");            // the time since the last lap
//   ... forward of mini-batch 7 ...
//   timer.Lap(WorkKind::kForward, "forward 7");
//   timer.Finish();                                // adds the thread's CPU seconds
//
// Thread-compatible: one thread owns a StageTimer; the trace recorder is thread-safe.
#ifndef P3_PIPELINE_STAGE_TIMER_H_
#define P3_PIPELINE_STAGE_TIMER_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "p3/base/trace.h"

namespace p3::pipeline {

enum class WorkKind { kForward, kBackward, kUpdate, kWeights, kWait };

// A stage's (data_parallel: a replica's) time in one or more Train() calls.
struct StageTimes {
  double forward_seconds = 0;   // forward passes, with the loss on the last stage
  double backward_seconds = 0;  // backward passes
  double update_seconds = 0;    // optimizer steps (and zeroing the gradients)
  // Putting weights into the model: SpecTrain's predicted ones, the real ones back,
  // PipeDream's stashes (taking and restoring); data_parallel: averaging the gradients.
  double weights_seconds = 0;
  double wait_seconds = 0;  // waiting for the neighbouring stages (replicas) or the input
  double cpu_seconds = 0;   // CPU time of the stage's thread (CLOCK_THREAD_CPUTIME_ID)

  // forward + backward + update + weights: the thread's working wall-clock time.
  double busy_seconds() const {
    return forward_seconds + backward_seconds + update_seconds + weights_seconds;
  }
  StageTimes& operator+=(const StageTimes& other);
};

// The calling thread's CPU time in seconds.
double ThreadCpuSeconds();

class StageTimer {
 public:
  // `trace` may be null (or disabled): times are still summed into `*times`, which must
  // outlive the timer. The clock starts now.
  StageTimer(TraceRecorder* trace, absl::string_view track, StageTimes* times);

  // Charges the time since the previous lap (or the start) to `kind` and records it as
  // an event called `name`.
  void Lap(WorkKind kind, absl::string_view name);
  // Restarts the lap clock without charging anything (time that is accounted elsewhere).
  void Skip();
  // Adds the thread's CPU seconds since construction to times->cpu_seconds. Call once.
  void Finish();

 private:
  TraceRecorder* trace_;
  int track_ = 0;
  StageTimes* times_;
  absl::Time last_;
  double cpu_start_;
};

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_STAGE_TIMER_H_
