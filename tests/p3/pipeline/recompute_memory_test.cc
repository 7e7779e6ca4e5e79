// Activation recomputation (PipelineOptions::recompute) and the per-stage memory the
// engine measures (PipelineOptions::measure_memory, stage_memory.h):
//   - recompute gives the same parameters and losses bit for bit as keeping the
//     activations, in every stage mode and under gpipe, because its rerun uses the
//     weights the forward used (pipedream's stash, SpecTrain's prediction) and leaves
//     BatchNorm's running statistics as the forward left them;
//   - PipeDream's stash on stage k < N-1 of 4 is N-k weight copies (it grows with the
//     mini-batches in flight; the last stage runs each backward right after its forward
//     and stashes nothing), SpecTrain v1's is empty, and their peaks are ordered so;
//   - 1F1B keeps more activations than vanilla on the first stage, and recompute keeps
//     fewer than 1F1B without it.
// Memory figures depend on the schedule, not on timing: each stage's in-flight count at
// any point of its own schedule is fixed.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/block_list_model.h"
#include "models/zoo.h"
#include "p3/pipeline/engine.h"
#include "p3/pipeline/stage_memory.h"
#include "p3/base/status_macros.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {
namespace {

using models::Batch;
using models::BlockModel;

// Blocks: Linear(d_b, d_{b+1}) + BatchNorm1d + tanh (the last without either): a model
// whose forward changes buffers.
class NormChain : public models::BlockListModel {
 public:
  explicit NormChain(const std::vector<int64_t>& dims) {
    for (size_t b = 0; b + 1 < dims.size(); ++b) {
      auto fc = register_module(absl::StrCat("fc", b), torch::nn::Linear(dims[b], dims[b + 1]));
      const bool last = b + 2 == dims.size();
      if (last) {
        AddBlock(absl::StrCat("fc", b), {fc}, [fc](const torch::Tensor& x) { return fc->forward(x); });
        continue;
      }
      auto bn = register_module(absl::StrCat("bn", b), torch::nn::BatchNorm1d(dims[b + 1]));
      AddBlock(absl::StrCat("fc", b), {fc, bn}, [fc, bn](const torch::Tensor& x) {
        return torch::tanh(bn->forward(fc->forward(x)));
      });
    }
  }
};

PipelineEngine::ModelFactory NormChainFactory(std::vector<int64_t> dims, uint64_t seed = 3) {
  return [dims, seed]() -> absl::StatusOr<std::shared_ptr<BlockModel>> {
    torch::manual_seed(seed);
    return std::static_pointer_cast<BlockModel>(std::make_shared<NormChain>(dims));
  };
}

struct Run {
  std::vector<torch::Tensor> parameters;
  torch::Tensor probe_output;  // Infer() (eval mode: BatchNorm's running statistics)
  std::vector<double> losses;
  std::vector<StageMemoryStats> memory;
  std::vector<int64_t> parameter_bytes;
};

absl::StatusOr<Run> RunEngine(PipelineOptions options, const PipelineEngine::ModelFactory& factory,
                              const std::vector<Batch>& batches, int epochs = 1,
                              const torch::Tensor& probe = {}) {
  P3_ASSIGN_OR_RETURN(std::unique_ptr<PipelineEngine> engine,
                      PipelineEngine::Create(options, factory));
  Run run;
  for (int e = 0; e < epochs; ++e) {
    P3_ASSIGN_OR_RETURN(TrainStats stats,
                        engine->Train(batches.size(), [&](int64_t i) -> absl::StatusOr<Batch> {
                          return batches.at(i);
                        }));
    run.losses.insert(run.losses.end(), stats.losses.begin(), stats.losses.end());
  }
  run.parameters = engine->Parameters();
  if (probe.defined()) {
    P3_ASSIGN_OR_RETURN(run.probe_output, engine->Infer(probe));
  }
  run.memory = engine->MemoryStats();
  run.parameter_bytes = engine->StageParameterBytes();
  engine->Shutdown();
  return run;
}

bool SameTensors(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t j = 0; j < a.size(); ++j) {
    if (!torch::equal(a[j], b[j])) return false;
  }
  return true;
}

struct ModeCase {
  std::string name;
  WeightMode mode;
  int version;
  PipelineSchedule schedule;
  int64_t microbatches;
};

const std::vector<ModeCase>& ModeCases() {
  static const auto* cases = new std::vector<ModeCase>{
      {"vanilla", WeightMode::kVanilla, 1, PipelineSchedule::kOneFOneB, 1},
      {"gpipe", WeightMode::kVanilla, 1, PipelineSchedule::kGPipe, 3},
      {"stale", WeightMode::kStale, 1, PipelineSchedule::kOneFOneB, 1},
      {"pipedream", WeightMode::kPipeDream, 1, PipelineSchedule::kOneFOneB, 1},
      {"spectrain v1", WeightMode::kSpecTrain, 1, PipelineSchedule::kOneFOneB, 1},
      {"spectrain v2", WeightMode::kSpecTrain, 2, PipelineSchedule::kOneFOneB, 1},
  };
  return *cases;
}

PipelineOptions OptionsFor(const ModeCase& c, int stages, bool recompute) {
  PipelineOptions options;
  options.mode = c.mode;
  options.spectrain_version = c.version;
  options.schedule = c.schedule;
  options.microbatches = c.microbatches;
  options.num_stages = stages;
  options.recompute = recompute;
  options.sgd = {0.05, 0.9, 0, 1e-4, false};
  return options;
}

CATCH_TEST_CASE("recompute trains bit for bit as keeping the activations, in every stage mode") {
  for (const std::string name : {"small_cnn", "row_lstm"}) {
    const std::vector<Batch> batches = MakeBatches(7, 6, {1, 28, 28}, 10, 61);
    std::vector<std::vector<torch::Tensor>> kept_runs;
    for (const ModeCase& c : ModeCases()) {
      CATCH_CAPTURE(name, c.name);
      absl::StatusOr<Run> kept = RunEngine(OptionsFor(c, 4, false), ZooFactory(name), batches);
      absl::StatusOr<Run> recomputed = RunEngine(OptionsFor(c, 4, true), ZooFactory(name), batches);
      CATCH_REQUIRE(kept.ok());
      CATCH_REQUIRE(recomputed.ok());
      CATCH_CHECK(SameTensors(recomputed->parameters, kept->parameters));
      CATCH_CHECK(recomputed->losses == kept->losses);
      kept_runs.push_back(kept->parameters);
    }
    // The modes really differ (stale, pipedream and spectrain use other weights than
    // vanilla), so rerunning a forward with the wrong weights would show.
    CATCH_CHECK(!SameTensors(kept_runs[0], kept_runs[2]));
    CATCH_CHECK(!SameTensors(kept_runs[0], kept_runs[3]));
    CATCH_CHECK(!SameTensors(kept_runs[0], kept_runs[4]));
    CATCH_CHECK(!SameTensors(kept_runs[4], kept_runs[5]));
  }
}

CATCH_TEST_CASE("recompute leaves BatchNorm statistics as the forward left them") {
  const std::vector<Batch> batches = MakeBatches(6, 8, {6}, 4, 67);
  const std::vector<int64_t> dims{6, 9, 8, 7, 4};
  for (const ModeCase& c : ModeCases()) {
    CATCH_CAPTURE(c.name);
    // Two Train() calls: the second starts from the first's weights and statistics. The
    // statistics show in inference (eval mode), which uses them instead of the batch's.
    const torch::Tensor probe = torch::randn({5, 6});
    absl::StatusOr<Run> kept =
        RunEngine(OptionsFor(c, 3, false), NormChainFactory(dims), batches, 2, probe);
    absl::StatusOr<Run> recomputed =
        RunEngine(OptionsFor(c, 3, true), NormChainFactory(dims), batches, 2, probe);
    CATCH_INFO(kept.status().ToString() << " / " << recomputed.status().ToString());
    CATCH_REQUIRE(kept.ok());
    CATCH_REQUIRE(recomputed.ok());
    CATCH_CHECK(SameTensors(recomputed->parameters, kept->parameters));
    CATCH_CHECK(recomputed->losses == kept->losses);
    CATCH_CHECK(torch::equal(recomputed->probe_output, kept->probe_output));
  }
}

CATCH_TEST_CASE("recompute is refused with data_parallel") {
  PipelineOptions options;
  options.mode = WeightMode::kDataParallel;
  options.recompute = true;
  absl::Status status = ValidatePipelineOptions(options);
  CATCH_CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StartsWith(status.message(), "recompute: not with mode data_parallel"));
}

// A 4-stage model with one block per stage, big enough that weights and activations
// dominate libtorch's small allocations.
PipelineEngine::ModelFactory WideMlp() {
  return [] () -> absl::StatusOr<std::shared_ptr<BlockModel>> {
    torch::manual_seed(9);
    return std::static_pointer_cast<BlockModel>(
        std::make_shared<NormChain>(std::vector<int64_t>{64, 256, 256, 256, 10}));
  };
}

// 4 stages of two blocks each, wide inside and narrow between stages: what a stage keeps
// for its backward is mostly inside it, so recomputation has something to save.
PipelineEngine::ModelFactory Bottlenecks() {
  return [] () -> absl::StatusOr<std::shared_ptr<BlockModel>> {
    torch::manual_seed(11);
    return std::static_pointer_cast<BlockModel>(std::make_shared<NormChain>(
        std::vector<int64_t>{64, 1024, 64, 1024, 64, 1024, 64, 1024, 10}));
  };
}

absl::StatusOr<Run> MeasuredRun(WeightMode mode, bool recompute, const std::vector<Batch>& batches,
                                const PipelineEngine::ModelFactory& factory = WideMlp()) {
  PipelineOptions options;
  options.mode = mode;
  options.num_stages = 4;
  options.recompute = recompute;
  options.measure_memory = true;
  return RunEngine(options, factory, batches);
}

CATCH_TEST_CASE("pipedream's stash grows with the mini-batches in flight, spectrain keeps none") {
  const std::vector<Batch> batches = MakeBatches(12, 64, {64}, 10, 71);
  absl::StatusOr<Run> pipedream = MeasuredRun(WeightMode::kPipeDream, false, batches);
  absl::StatusOr<Run> spectrain = MeasuredRun(WeightMode::kSpecTrain, false, batches);
  CATCH_REQUIRE(pipedream.ok());
  CATCH_REQUIRE(spectrain.ok());
  CATCH_REQUIRE(pipedream->memory.size() == 4);
  CATCH_REQUIRE(spectrain->memory.size() == 4);
  for (int k = 0; k < 4; ++k) {
    CATCH_CAPTURE(k);
    const StageMemoryStats& p = pipedream->memory[k];
    const StageMemoryStats& s = spectrain->memory[k];
    CATCH_CHECK(s.CategoryPeak(MemoryCategory::kStash) == 0);
    if (k == 3) {
      // The last stage: no update between a forward and its backward, so no stash and
      // no separate real weights (SpecTrain v1 predicts s = 1 there and keeps them).
      CATCH_CHECK(p.CategoryPeak(MemoryCategory::kStash) == 0);
      CATCH_CHECK(p.CategoryPeak(MemoryCategory::kOptimizer) <
                  s.CategoryPeak(MemoryCategory::kOptimizer));
      CATCH_CHECK(p.peak_bytes < s.peak_bytes);
      continue;
    }
    // Stage k holds one copy of its weights per mini-batch in flight: N - k under 1F1B.
    CATCH_CHECK(p.CategoryPeak(MemoryCategory::kStash) ==
                (4 - k) * pipedream->parameter_bytes[k]);
    // Both keep the real weights apart and run the same schedule: the stash is the
    // difference.
    CATCH_CHECK(p.CategoryPeak(MemoryCategory::kOptimizer) ==
                s.CategoryPeak(MemoryCategory::kOptimizer));
    CATCH_CHECK(p.peak_bytes > s.peak_bytes);
    // Every tensor a stage made is freed or still held by its model and optimizer.
    CATCH_CHECK(p.Current(MemoryCategory::kStash) == p.CategoryPeak(MemoryCategory::kStash));
    CATCH_CHECK(p.Current(MemoryCategory::kForward) == 0);
  }
  for (int k = 0; k + 1 < 4; ++k) {
    CATCH_CHECK(pipedream->memory[k].CategoryPeak(MemoryCategory::kStash) >
                pipedream->memory[k + 1].CategoryPeak(MemoryCategory::kStash) *
                    pipedream->parameter_bytes[k] / pipedream->parameter_bytes[k + 1]);
  }
}

CATCH_TEST_CASE("1f1b keeps more activations than vanilla on the first stage, recompute fewer") {
  const std::vector<Batch> batches = MakeBatches(12, 64, {64}, 10, 73);
  absl::StatusOr<Run> vanilla = MeasuredRun(WeightMode::kVanilla, false, batches, Bottlenecks());
  absl::StatusOr<Run> stale = MeasuredRun(WeightMode::kStale, false, batches, Bottlenecks());
  absl::StatusOr<Run> stale_recompute =
      MeasuredRun(WeightMode::kStale, true, batches, Bottlenecks());
  CATCH_REQUIRE(vanilla.ok());
  CATCH_REQUIRE(stale.ok());
  CATCH_INFO(stale_recompute.status().ToString());
  CATCH_REQUIRE(stale_recompute.ok());
  const auto forward = [](const Run& r, int k) {
    return r.memory[k].CategoryPeak(MemoryCategory::kForward);
  };
  CATCH_INFO("stage 0 forward peaks: vanilla " << forward(*vanilla, 0) << ", stale "
                                              << forward(*stale, 0) << ", stale recompute "
                                              << forward(*stale_recompute, 0));
  // Stage 0 holds 4 mini-batches' activations under 1F1B, 1 in vanilla (whose peak also
  // has the forward's temporaries).
  CATCH_CHECK(forward(*stale, 0) > 2 * forward(*vanilla, 0));
  // With recompute it keeps only what it hands on (its output, counted for it until
  // stage 1 drops it) and one mini-batch's rerun.
  CATCH_CHECK(forward(*stale_recompute, 0) < forward(*stale, 0) / 2);
  // What recompute costs in stale: a stash of the forward's weights per mini-batch.
  CATCH_CHECK(stale->memory[0].CategoryPeak(MemoryCategory::kStash) == 0);
  CATCH_CHECK(stale_recompute->memory[0].CategoryPeak(MemoryCategory::kStash) ==
              4 * stale_recompute->parameter_bytes[0]);
  // Results unchanged.
  CATCH_CHECK(SameTensors(stale->parameters, stale_recompute->parameters));
  // Without measure_memory there are no figures.
  PipelineOptions options;
  options.num_stages = 2;
  absl::StatusOr<Run> unmeasured = RunEngine(options, WideMlp(), batches);
  CATCH_REQUIRE(unmeasured.ok());
  CATCH_CHECK(unmeasured->memory.empty());
}

}  // namespace
}  // namespace p3::pipeline
