#include "p3/pipeline/stage_timer.h"

#include <time.h>

#include "absl/time/clock.h"

namespace p3::pipeline {
namespace {

const char* Category(WorkKind kind) {
  switch (kind) {
    case WorkKind::kForward:
      return "forward";
    case WorkKind::kBackward:
      return "backward";
    case WorkKind::kUpdate:
      return "update";
    case WorkKind::kWeights:
      return "weights";
    case WorkKind::kWait:
      return "wait";
  }
  return "other";
}

}  // namespace

StageTimes& StageTimes::operator+=(const StageTimes& other) {
  forward_seconds += other.forward_seconds;
  backward_seconds += other.backward_seconds;
  update_seconds += other.update_seconds;
  weights_seconds += other.weights_seconds;
  wait_seconds += other.wait_seconds;
  cpu_seconds += other.cpu_seconds;
  return *this;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

StageTimer::StageTimer(TraceRecorder* trace, absl::string_view track, StageTimes* times)
    : trace_(trace != nullptr && trace->enabled() ? trace : nullptr),
      times_(times),
      last_(absl::Now()),
      cpu_start_(ThreadCpuSeconds()) {
  if (trace_ != nullptr) track_ = trace_->Track(track);
}

void StageTimer::Lap(WorkKind kind, absl::string_view name) {
  const absl::Time now = absl::Now();
  const double seconds = absl::ToDoubleSeconds(now - last_);
  switch (kind) {
    case WorkKind::kForward:
      times_->forward_seconds += seconds;
      break;
    case WorkKind::kBackward:
      times_->backward_seconds += seconds;
      break;
    case WorkKind::kUpdate:
      times_->update_seconds += seconds;
      break;
    case WorkKind::kWeights:
      times_->weights_seconds += seconds;
      break;
    case WorkKind::kWait:
      times_->wait_seconds += seconds;
      break;
  }
  if (trace_ != nullptr) trace_->Complete(track_, name, Category(kind), last_, now);
  last_ = now;
}

void StageTimer::Skip() { last_ = absl::Now(); }

void StageTimer::Finish() { times_->cpu_seconds += ThreadCpuSeconds() - cpu_start_; }

}  // namespace p3::pipeline
