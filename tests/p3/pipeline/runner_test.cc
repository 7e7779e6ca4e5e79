// pipeline_train's run from a config, end to end on a small synthetic data set: every
// weight mode learns it and reports each epoch, the partition is profiled or taken from
// the config, PROGRESS lines are written, and bad partitions or absent GPUs are errors
// that say so. Also the translation of the config into the engine's options.
#include "p3/pipeline/runner.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "p3/pipeline/run_config.h"
#include "p3/pipeline/schedule.h"
#include "p3/base/progress.h"
#include "proto/config.h"

namespace p3::pipeline {
namespace {

constexpr char kConfig[] = R"(
name: "pipeline_runner_test"
mode: "pipeline"
model { name: "small_cnn" }
data { dataset: "synthetic" synthetic_size: 384 }
optimizer { name: "sgd" lr: 0.05 momentum: 0.9 weight_decay: 1e-4 }
training { batch_size: 32 epochs: 2 seed: 1 warmup_iterations: 2 evaluate: true threads: 1 }
)";

config::ExperimentConfig Config(const std::vector<std::string>& overrides) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig(kConfig, overrides);
  CATCH_REQUIRE(config.ok());
  return *config;
}

// As pipeline_train runs it: the calling thread's libtorch threads (profiling,
// evaluation) set from training.threads first, since RunPipeline() leaves them alone.
absl::StatusOr<RunResult> Run(const config::ExperimentConfig& config,
                              const RunOptions& options = {}) {
  torch::set_num_threads(config.training().threads());
  return RunPipeline(config, options);
}

CATCH_TEST_CASE("every weight mode trains from a config and reports each epoch") {
  for (const std::string weights :
       {"spectrain", "pipedream", "stale", "vanilla", "data_parallel"}) {
    CATCH_CAPTURE(weights);
    absl::StatusOr<RunResult> result =
        Run(Config({"pipeline.weights=" + weights, "pipeline.stages=2"}));
    CATCH_REQUIRE(result.ok());
    CATCH_CHECK(result->weights == weights);
    CATCH_CHECK(result->iterations == 24);  // 2 epochs of 384 / 32
    CATCH_REQUIRE(result->epochs.size() == 2);
    for (const EpochRecord& e : result->epochs) {
      CATCH_CHECK(e.iterations == 12);
      CATCH_CHECK(std::isfinite(e.train_loss));
      CATCH_CHECK(e.samples_per_second > 0);
      CATCH_REQUIRE(e.test_accuracy.has_value());
      CATCH_CHECK(*e.test_accuracy >= 0);
      CATCH_CHECK(*e.test_accuracy <= 1);
    }
    CATCH_CHECK(result->test_accuracy == result->epochs.back().test_accuracy);
    // Learning, not just running (deterministic: fixed seeds, one thread per stage): the
    // second epoch's loss is clearly below the first's (about ln 10 = 2.30, measured 2.25
    // for every mode; the second 1.32 to 1.55), and the test accuracy is well above
    // chance (0.1; measured 0.69 to 0.92).
    CATCH_CHECK(result->epochs[1].train_loss < 0.8 * result->epochs[0].train_loss);
    CATCH_CHECK(*result->test_accuracy > 0.5);
    CATCH_CHECK(result->stage_blocks.size() == 2);
    if (weights == "data_parallel") {
      CATCH_CHECK(result->boundaries.empty());
      CATCH_CHECK(result->stage_blocks[0] == "conv1+conv2+fc1+fc2");
    } else {
      // Profiled and balanced: one boundary inside the 4 blocks.
      CATCH_REQUIRE(result->boundaries.size() == 1);
      CATCH_CHECK(result->boundaries[0] >= 1);
      CATCH_CHECK(result->boundaries[0] <= 3);
      CATCH_CHECK(result->block_seconds.size() == 4);
    }
    const nlohmann::json json = nlohmann::json::parse(result->ToJson());
    CATCH_CHECK(json["weights"] == weights);
    CATCH_REQUIRE(json["epochs"].size() == 2);
    CATCH_CHECK(json["epochs"][0]["epoch"] == 1);
    const std::vector<std::string> lines = absl::StrSplit(result->EpochsCsv(), '\n');
    CATCH_CHECK(lines[0] == "epoch,iterations,train_loss,seconds,samples_per_second,test_accuracy");
    CATCH_CHECK(absl::StartsWith(lines[2], "2,12,"));
  }
}

CATCH_TEST_CASE("the synthetic task is learnt through a 4-stage SpecTrain pipeline") {
  absl::StatusOr<RunResult> result =
      Run(Config({"pipeline.stages=4", "pipeline.spectrain_version=1", "training.epochs=5",
                  "optimizer.lr=0.01"}));
  CATCH_REQUIRE(result.ok());
  CATCH_CHECK(result->stage_blocks == std::vector<std::string>{"conv1", "conv2", "fc1", "fc2"});
  CATCH_REQUIRE(result->test_accuracy.has_value());
  CATCH_CHECK(*result->test_accuracy > 0.5);  // chance is 0.1
  CATCH_CHECK(result->epochs.back().train_loss < result->epochs.front().train_loss);
}

CATCH_TEST_CASE("gpipe trains from a config and reports its schedule and bubble") {
  absl::StatusOr<RunResult> result =
      Run(Config({"pipeline.schedule=gpipe", "pipeline.stages=2", "pipeline.microbatches=4"}));
  CATCH_REQUIRE(result.ok());
  CATCH_CHECK(result->weights == "vanilla");  // gpipe's default
  CATCH_CHECK(result->schedule == "gpipe");
  CATCH_CHECK(result->microbatches == 4);
  CATCH_REQUIRE(result->epochs.size() == 2);
  CATCH_CHECK(result->epochs[1].train_loss < 0.8 * result->epochs[0].train_loss);
  CATCH_REQUIRE(result->test_accuracy.has_value());
  CATCH_CHECK(*result->test_accuracy > 0.5);
  CATCH_CHECK(result->bubble_fraction > 0);
  CATCH_CHECK(result->bubble_fraction < 1);
  const nlohmann::json json = nlohmann::json::parse(result->ToJson());
  CATCH_CHECK(json["schedule"] == "gpipe");
  CATCH_CHECK(json["microbatches"] == 4);
}

CATCH_TEST_CASE("interleaved 1F1B and recompute train from a config and say so in the result") {
  // small_cnn's 4 blocks: 2 stages x 2 chunks, balanced over 4 virtual stages.
  absl::StatusOr<RunResult> result =
      Run(Config({"pipeline.schedule=interleaved_1f1b", "pipeline.stages=2",
                  "pipeline.microbatches=4", "pipeline.recompute=true"}));
  CATCH_INFO(result.status().ToString());
  CATCH_REQUIRE(result.ok());
  CATCH_CHECK(result->weights == "vanilla");  // the default under interleaved_1f1b
  CATCH_CHECK(result->schedule == "interleaved_1f1b");
  CATCH_CHECK(result->chunks == 2);
  CATCH_CHECK(result->recompute);
  CATCH_CHECK(result->stage_blocks.size() == 4);  // virtual stages
  CATCH_CHECK(result->boundaries.size() == 3);
  CATCH_CHECK(result->memory.size() == 2);  // threads
  CATCH_REQUIRE(result->epochs.size() == 2);
  CATCH_CHECK(result->epochs[1].train_loss < 0.8 * result->epochs[0].train_loss);
  CATCH_REQUIRE(result->test_accuracy.has_value());
  CATCH_CHECK(*result->test_accuracy > 0.5);
  const nlohmann::json json = nlohmann::json::parse(result->ToJson());
  CATCH_CHECK(json["chunks"] == 2);
  CATCH_CHECK(json["recompute"] == true);
  absl::StatusOr<PipelineOptions> po = PipelineOptionsFromConfig(
      Config({"pipeline.schedule=interleaved_1f1b", "pipeline.stages=2", "pipeline.chunks=3",
              "pipeline.recompute=true"}));
  CATCH_REQUIRE(po.ok());
  CATCH_CHECK(po->schedule == PipelineSchedule::kInterleaved1F1B);
  CATCH_CHECK(po->chunks == 3);
  CATCH_CHECK(po->microbatches == 2);
  CATCH_CHECK(po->recompute);
}

CATCH_TEST_CASE("train_samples limits an epoch to the first samples of the training set") {
  absl::StatusOr<RunResult> result =
      Run(Config({"pipeline.train_samples=128", "training.evaluate=false"}));
  CATCH_REQUIRE(result.ok());
  CATCH_CHECK(result->train_samples == 128);
  CATCH_CHECK(result->iterations == 8);  // 2 epochs of 128 / 32
  CATCH_REQUIRE(result->epochs.size() == 2);
  CATCH_CHECK(result->epochs[0].iterations == 4);
  result = Run(Config({"pipeline.train_samples=385"}));  // the set has 384
  CATCH_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(result.status().message(),
                                "pipeline.train_samples: 385 is more than the training set's 384"));
}

CATCH_TEST_CASE("explicit boundaries are used and iterations cut the last epoch short") {
  absl::StatusOr<config::ExperimentConfig> config =
      config::ParseConfig(std::string(kConfig) +
                              "pipeline { weights: \"stale\" stages: 3 boundaries: 1 "
                              "boundaries: 3 }",
                          {"training.iterations=15", "training.evaluate=false"});
  CATCH_REQUIRE(config.ok());
  absl::StatusOr<RunResult> result = Run(*config);
  CATCH_REQUIRE(result.ok());
  CATCH_CHECK(result->boundaries == std::vector<int64_t>{1, 3});
  CATCH_CHECK(result->stage_blocks == std::vector<std::string>{"conv1", "conv2+fc1", "fc2"});
  CATCH_CHECK(result->block_seconds.empty());  // not profiled
  CATCH_REQUIRE(result->epochs.size() == 2);
  CATCH_CHECK(result->epochs[1].iterations == 3);
  CATCH_CHECK_FALSE(result->test_accuracy.has_value());
}

CATCH_TEST_CASE("PROGRESS lines report every log_every mini-batches and the last one") {
  std::ostringstream out;
  RunOptions options;
  options.progress = &out;
  absl::StatusOr<RunResult> result =
      Run(Config({"pipeline.weights=vanilla", "training.iterations=7", "training.log_every=3",
                  "training.evaluate=false"}),
          options);
  CATCH_REQUIRE(result.ok());
  std::vector<int64_t> iterations;
  int epoch_lines = 0;
  int memory_lines = 0;
  for (absl::string_view line : absl::StrSplit(out.str(), '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "EPOCH ")) {
      ++epoch_lines;
      continue;
    }
    if (absl::StartsWith(line, "MEMORY ")) {
      // One per stage after the last epoch, e.g. "MEMORY stage=0 peak_mib=... forward=...".
      CATCH_CHECK(absl::StartsWith(line, absl::StrCat("MEMORY stage=", memory_lines, " ")));
      CATCH_CHECK(absl::StrContains(line, " stash="));
      ++memory_lines;
      continue;
    }
    std::optional<ProgressLine> progress = ParseProgressLine(line);
    CATCH_REQUIRE(progress.has_value());
    CATCH_CHECK(progress->total == 7);
    CATCH_CHECK(std::isfinite(progress->loss));
    iterations.push_back(progress->iteration);
  }
  CATCH_CHECK(iterations == std::vector<int64_t>{3, 6, 7});
  CATCH_CHECK(epoch_lines == 1);
  CATCH_CHECK(memory_lines == 2);
  // The measured memory per stage: the replica, and what training allocated.
  CATCH_REQUIRE(result->memory.size() == 2);
  for (const StageMemoryRecord& m : result->memory) {
    CATCH_CHECK(m.parameter_bytes > 0);
    CATCH_CHECK(m.peak_bytes > m.parameter_bytes);
    CATCH_REQUIRE(m.at_peak.size() == 6);
    CATCH_CHECK(m.at_peak[0].first == "model");
    CATCH_CHECK(m.at_peak[0].second > 0);
  }
  const nlohmann::json json = nlohmann::json::parse(result->ToJson());
  CATCH_CHECK(json["memory"].size() == 2);
  CATCH_CHECK(json["memory"][1]["peak_bytes"].get<int64_t>() == result->memory[1].peak_bytes);
  CATCH_CHECK(json["recompute"] == false);
}

CATCH_TEST_CASE("a config's pipeline, optimizer and training sections become engine options") {
  absl::StatusOr<config::ExperimentConfig> config =
      config::ParseConfig(std::string(kConfig) +
                              "pipeline { weights: \"pipedream\" stages: 3 boundaries: 1 "
                              "boundaries: 3 }",
                          {"optimizer.lr=0.02", "optimizer.nesterov=true", "training.threads=2"});
  CATCH_REQUIRE(config.ok());
  absl::StatusOr<PipelineOptions> po = PipelineOptionsFromConfig(*config);
  CATCH_REQUIRE(po.ok());
  CATCH_CHECK(po->mode == WeightMode::kPipeDream);
  CATCH_CHECK(po->spectrain_version == 1);
  CATCH_CHECK(po->num_stages == 3);
  CATCH_CHECK(po->devices == std::vector<std::string>{"cpu", "cpu", "cpu"});
  CATCH_CHECK(po->boundaries == std::vector<int64_t>{1, 3});
  CATCH_CHECK(po->sgd.lr == 0.02);
  CATCH_CHECK(po->sgd.momentum == 0.9);
  CATCH_CHECK(po->sgd.weight_decay == 1e-4);
  CATCH_CHECK(po->sgd.nesterov);
  CATCH_CHECK(po->threads_per_stage == 2);
  CATCH_CHECK_FALSE(po->on_done);
  CATCH_CHECK(RunIterations(*config, 12) == 24);  // 2 epochs
  CATCH_CHECK(RunIterations(Config({"training.iterations=15"}), 12) == 15);

  CATCH_CHECK(po->schedule == PipelineSchedule::kOneFOneB);
  CATCH_CHECK(po->microbatches == 1);
  po = PipelineOptionsFromConfig(
      Config({"pipeline.schedule=gpipe", "pipeline.microbatches=8", "pipeline.stages=4"}));
  CATCH_REQUIRE(po.ok());
  CATCH_CHECK(po->schedule == PipelineSchedule::kGPipe);
  CATCH_CHECK(po->microbatches == 8);
  CATCH_CHECK(po->mode == WeightMode::kVanilla);

  config::ExperimentConfig data_parallel = Config({"pipeline.weights=data_parallel"});
  po = PipelineOptionsFromConfig(data_parallel);
  CATCH_REQUIRE(po.ok());
  CATCH_CHECK(po->mode == WeightMode::kDataParallel);
  CATCH_CHECK(po->boundaries.empty());
}

CATCH_TEST_CASE("boundaries beyond the model and absent GPUs are errors that say so") {
  absl::StatusOr<config::ExperimentConfig> config =
      config::ParseConfig(std::string(kConfig) + "pipeline { stages: 2 boundaries: 4 }", {});
  CATCH_REQUIRE(config.ok());
  absl::StatusOr<RunResult> result = Run(*config);
  CATCH_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(result.status().message(), "boundaries"));

  if (!torch::cuda::is_available()) {
    config = config::ParseConfig(
        std::string(kConfig) + "pipeline { stages: 2 devices: \"cpu\" devices: \"cuda:0\" }", {});
    CATCH_REQUIRE(config.ok());
    result = Run(*config);
    CATCH_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(absl::StrContains(result.status().message(), "no CUDA GPU is present"));
  }

  absl::StatusOr<config::ExperimentConfig> p3 = config::ParseConfig("mode: \"p3\"", {});
  CATCH_REQUIRE(p3.ok());
  CATCH_CHECK_FALSE(Run(*p3).ok());
}

}  // namespace
}  // namespace p3::pipeline
