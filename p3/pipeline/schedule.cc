#include "p3/pipeline/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3::pipeline {

std::string StepName(const ScheduleStep& step, bool with_chunk) {
  std::string name = absl::StrCat(step.pass == Pass::kForward ? "F" : "B", step.microbatch);
  if (with_chunk || step.chunk != 0) absl::StrAppend(&name, "c", step.chunk);
  return name;
}

std::string ScheduleString(const std::vector<ScheduleStep>& steps, bool with_chunk) {
  return absl::StrJoin(steps, " ", [with_chunk](std::string* out, const ScheduleStep& step) {
    out->append(StepName(step, with_chunk));
  });
}

int64_t WarmupForwards(int num_stages, int stage, int64_t num_microbatches, bool pipelined) {
  if (!pipelined) return 0;
  return std::max<int64_t>(0, std::min<int64_t>(num_stages - stage - 1, num_microbatches));
}

std::vector<ScheduleStep> OneFOneBSchedule(int num_stages, int stage, int64_t num_microbatches,
                                           bool pipelined) {
  const int64_t warmup = WarmupForwards(num_stages, stage, num_microbatches, pipelined);
  std::vector<ScheduleStep> steps;
  steps.reserve(2 * std::max<int64_t>(0, num_microbatches));
  int64_t next_forward = 0;
  int64_t next_backward = 0;
  for (; next_forward < warmup; ++next_forward) {
    steps.push_back({Pass::kForward, next_forward});
  }
  while (next_forward < num_microbatches) {
    steps.push_back({Pass::kForward, next_forward++});
    steps.push_back({Pass::kBackward, next_backward++});
  }
  while (next_backward < num_microbatches) {
    steps.push_back({Pass::kBackward, next_backward++});
  }
  return steps;
}

std::string PipelineScheduleName(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kOneFOneB:
      return "1f1b";
    case PipelineSchedule::kGPipe:
      return "gpipe";
    case PipelineSchedule::kInterleaved1F1B:
      return "interleaved_1f1b";
  }
  return "unknown";
}

absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(absl::string_view name) {
  if (name == "1f1b") return PipelineSchedule::kOneFOneB;
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "interleaved_1f1b") return PipelineSchedule::kInterleaved1F1B;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pipeline schedule \"", name,
                   "\"; allowed: \"1f1b\", \"gpipe\", \"interleaved_1f1b\""));
}

std::vector<ScheduleStep> GPipeSchedule(int64_t num_minibatches, int64_t microbatches) {
  std::vector<ScheduleStep> steps;
  steps.reserve(2 * std::max<int64_t>(0, num_minibatches * microbatches));
  for (int64_t i = 0; i < num_minibatches; ++i) {
    for (int64_t m = 0; m < microbatches; ++m) {
      steps.push_back({Pass::kForward, i * microbatches + m});
    }
    for (int64_t m = 0; m < microbatches; ++m) {
      steps.push_back({Pass::kBackward, i * microbatches + m});
    }
  }
  return steps;
}

std::vector<ScheduleStep> InterleavedSchedule(int num_stages, int stage, int chunks,
                                              int64_t num_minibatches, int64_t microbatches) {
  const int64_t k = num_stages;
  const int64_t v = chunks;
  const int64_t m = microbatches;
  const int64_t total = v * m;  // forwards (and backwards) per mini-batch
  const int64_t warmup =
      m == k ? total : std::min<int64_t>(2 * (k - stage - 1) + (v - 1) * k, total);
  // Forward (or backward) number f of a mini-batch: its chunk and micro-batch.
  auto step = [&](int64_t i, Pass pass, int64_t f) {
    const int64_t group = f % (k * v);
    int64_t chunk = group / k;
    if (pass == Pass::kBackward) chunk = v - 1 - chunk;
    return ScheduleStep{pass, i * m + (f / (k * v)) * k + f % k, static_cast<int>(chunk)};
  };
  std::vector<ScheduleStep> steps;
  steps.reserve(2 * std::max<int64_t>(0, num_minibatches * total));
  for (int64_t i = 0; i < num_minibatches; ++i) {
    int64_t forward = 0;
    int64_t backward = 0;
    for (; forward < warmup; ++forward) steps.push_back(step(i, Pass::kForward, forward));
    while (forward < total) {
      steps.push_back(step(i, Pass::kForward, forward++));
      steps.push_back(step(i, Pass::kBackward, backward++));
    }
    while (backward < total) steps.push_back(step(i, Pass::kBackward, backward++));
  }
  return steps;
}

double InterleavedBubbleFraction(int num_stages, int chunks, int64_t microbatches) {
  return static_cast<double>(num_stages - 1) /
         static_cast<double>(static_cast<int64_t>(chunks) * microbatches + num_stages - 1);
}

double GPipeBubbleFraction(int num_stages, int64_t microbatches) {
  return static_cast<double>(num_stages - 1) /
         static_cast<double>(microbatches + num_stages - 1);
}

std::string WeightModeName(WeightMode mode) {
  switch (mode) {
    case WeightMode::kSpecTrain:
      return "spectrain";
    case WeightMode::kPipeDream:
      return "pipedream";
    case WeightMode::kStale:
      return "stale";
    case WeightMode::kVanilla:
      return "vanilla";
    case WeightMode::kDataParallel:
      return "data_parallel";
  }
  return "unknown";
}

std::vector<std::string> WeightModeNames() {
  std::vector<std::string> names;
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kStale,
                          WeightMode::kVanilla, WeightMode::kDataParallel}) {
    names.push_back(WeightModeName(mode));
  }
  return names;
}

absl::StatusOr<WeightMode> ParseWeightMode(absl::string_view name) {
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kStale,
                          WeightMode::kVanilla, WeightMode::kDataParallel}) {
    if (name == WeightModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pipeline weight mode \"", name,
                   "\"; allowed: ", absl::StrJoin(WeightModeNames(), ", ")));
}

bool IsPipelined(WeightMode mode) {
  return mode == WeightMode::kSpecTrain || mode == WeightMode::kPipeDream ||
         mode == WeightMode::kStale;
}

int PredictionDistance(WeightMode mode, int spectrain_version, int num_stages, int stage,
                       Pass pass) {
  if (mode != WeightMode::kSpecTrain) return 0;
  const int behind = num_stages - stage - 1;  // versions the forward is missing (1F1B)
  if (spectrain_version == 2) return behind;  // the backward reuses the forward's weights
  const int half = stage / 2;
  return pass == Pass::kForward ? half + behind : half;
}

bool KeepsRealWeightsApart(WeightMode mode, int spectrain_version, int num_stages, int stage) {
  if (mode == WeightMode::kPipeDream) return stage + 1 < num_stages;
  if (mode != WeightMode::kSpecTrain) return false;
  return PredictionDistance(mode, spectrain_version, num_stages, stage, Pass::kForward) != 0 ||
         PredictionDistance(mode, spectrain_version, num_stages, stage, Pass::kBackward) != 0;
}

}  // namespace p3::pipeline
