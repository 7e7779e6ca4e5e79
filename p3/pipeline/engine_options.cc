#include "p3/pipeline/engine_options.h"

#include "absl/strings/str_cat.h"

namespace p3::pipeline {
namespace {

constexpr int kMaxStages = 64;

}  // namespace

absl::Status ValidatePipelineOptions(const PipelineOptions& o) {
  if (o.num_stages < 1 || o.num_stages > kMaxStages) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_stages: ", o.num_stages, " is out of range; allowed 1..", kMaxStages));
  }
  if (o.spectrain_version != 1 && o.spectrain_version != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("spectrain_version: ", o.spectrain_version, " is not allowed; allowed: 1, 2"));
  }
  if (!o.devices.empty() && static_cast<int>(o.devices.size()) != o.num_stages) {
    return absl::InvalidArgumentError(absl::StrCat("devices: ", o.devices.size(), " devices for ",
                                                   o.num_stages,
                                                   " stages; give one per stage or none"));
  }
  if (o.microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("microbatches: ", o.microbatches, " is out of range; allowed >= 1"));
  }
  if (o.schedule == PipelineSchedule::kGPipe && o.mode != WeightMode::kVanilla) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule: gpipe does not combine with mode ", WeightModeName(o.mode),
        " (GPipe updates once per mini-batch after draining, so no weights are stale); "
        "allowed: vanilla"));
  }
  if (o.schedule == PipelineSchedule::kInterleaved1F1B) {
    if (o.mode != WeightMode::kVanilla) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule: interleaved_1f1b does not combine with mode ", WeightModeName(o.mode),
          " (it updates once per mini-batch after draining, so no weights are stale; "
          "data_parallel has no stages); allowed: vanilla"));
    }
    if (o.chunks < 2 || o.chunks > kMaxStages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunks: ", o.chunks, " is out of range for interleaved_1f1b; allowed 2..", kMaxStages));
    }
    if (o.microbatches % o.num_stages != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "microbatches: ", o.microbatches, " is not a multiple of num_stages (", o.num_stages,
          "); interleaved_1f1b runs micro-batches in groups of one per stage"));
    }
  } else if (o.chunks != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunks: ", o.chunks, " with schedule ", PipelineScheduleName(o.schedule),
        "; allowed: 1 (model chunks need schedule interleaved_1f1b)"));
  }
  if (o.schedule == PipelineSchedule::kOneFOneB && o.microbatches != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "microbatches: ", o.microbatches,
        " with schedule 1f1b; allowed: 1 (1F1B pipelines whole mini-batches)"));
  }
  if (o.recompute && o.mode == WeightMode::kDataParallel) {
    return absl::InvalidArgumentError(
        "recompute: not with mode data_parallel (each replica's backward follows its forward "
        "at once, so there are no kept activations to recompute); allowed with spectrain, "
        "pipedream, stale, vanilla");
  }
  if (o.threads_per_stage < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads_per_stage: ", o.threads_per_stage, " is out of range; allowed >= 0"));
  }
  return ValidateSgdOptions(o.sgd);
}

double BubbleFraction(const TrainStats& stats) {
  if (stats.busy_seconds.empty() || stats.seconds <= 0) return 0;
  double busy = 0;
  for (double b : stats.busy_seconds) busy += b;
  return 1.0 - busy / (static_cast<double>(stats.busy_seconds.size()) * stats.seconds);
}

}  // namespace p3::pipeline
