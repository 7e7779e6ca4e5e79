#include "p3/pipeline/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3::pipeline {

std::string StepName(const ScheduleStep& step) {
  return absl::StrCat(step.pass == Pass::kForward ? "F" : "B", step.microbatch);
}

std::string ScheduleString(const std::vector<ScheduleStep>& steps) {
  return absl::StrJoin(
      steps, " ", [](std::string* out, const ScheduleStep& step) { out->append(StepName(step)); });
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
  }
  return "unknown";
}

absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(absl::string_view name) {
  if (name == "1f1b") return PipelineSchedule::kOneFOneB;
  if (name == "gpipe") return PipelineSchedule::kGPipe;
  if (name == "interleaved_1f1b") {
    return absl::UnimplementedError(
        "pipeline schedule \"interleaved_1f1b\" is not implemented yet; allowed: \"1f1b\", "
        "\"gpipe\"");
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown pipeline schedule \"", name,
                                                 "\"; allowed: \"1f1b\", \"gpipe\""));
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
  return {"spectrain", "pipedream", "stale", "vanilla", "data_parallel"};
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
