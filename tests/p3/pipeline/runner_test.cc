// pipeline_train's run from a config, end to end on a small synthetic data set: every
// weight mode trains and evaluates per epoch, the partition is profiled or taken from
// the config, and bad partitions or absent GPUs are errors that say so.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "p3/pipeline/runner.h"
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

CATCH_TEST_CASE("every weight mode trains from a config and reports each epoch") {
  for (const std::string weights :
       {"spectrain", "pipedream", "stale", "vanilla", "data_parallel"}) {
    CATCH_CAPTURE(weights);
    absl::StatusOr<RunResult> result =
        RunPipeline(Config({"pipeline.weights=" + weights, "pipeline.stages=2"}), {});
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
    const std::string json = result->ToJson();
    CATCH_CHECK(absl::StrContains(json, "\"weights\": \"" + weights + "\""));
    CATCH_CHECK(absl::StrContains(json, "\"epochs\": [{\"epoch\": 1"));
    const std::vector<std::string> lines = absl::StrSplit(result->EpochsCsv(), '\n');
    CATCH_CHECK(lines[0] == "epoch,iterations,train_loss,seconds,samples_per_second,test_accuracy");
    CATCH_CHECK(absl::StartsWith(lines[2], "2,12,"));
  }
}

CATCH_TEST_CASE("the synthetic task is learnt through a 4-stage SpecTrain pipeline") {
  absl::StatusOr<RunResult> result =
      RunPipeline(Config({"pipeline.stages=4", "pipeline.spectrain_version=1", "training.epochs=5",
                          "optimizer.lr=0.01"}),
                  {});
  CATCH_REQUIRE(result.ok());
  CATCH_CHECK(result->stage_blocks == std::vector<std::string>{"conv1", "conv2", "fc1", "fc2"});
  CATCH_REQUIRE(result->test_accuracy.has_value());
  CATCH_CHECK(*result->test_accuracy > 0.5);  // chance is 0.1
  CATCH_CHECK(result->epochs.back().train_loss < result->epochs.front().train_loss);
}

CATCH_TEST_CASE("explicit boundaries are used and iterations cut the last epoch short") {
  absl::StatusOr<config::ExperimentConfig> config =
      config::ParseConfig(std::string(kConfig) +
                              "pipeline { weights: \"stale\" stages: 3 boundaries: 1 "
                              "boundaries: 3 }",
                          {"training.iterations=15", "training.evaluate=false"});
  CATCH_REQUIRE(config.ok());
  absl::StatusOr<RunResult> result = RunPipeline(*config, {});
  CATCH_REQUIRE(result.ok());
  CATCH_CHECK(result->boundaries == std::vector<int64_t>{1, 3});
  CATCH_CHECK(result->stage_blocks == std::vector<std::string>{"conv1", "conv2+fc1", "fc2"});
  CATCH_CHECK(result->block_seconds.empty());  // not profiled
  CATCH_REQUIRE(result->epochs.size() == 2);
  CATCH_CHECK(result->epochs[1].iterations == 3);
  CATCH_CHECK_FALSE(result->test_accuracy.has_value());
}

CATCH_TEST_CASE("boundaries beyond the model and absent GPUs are errors that say so") {
  absl::StatusOr<config::ExperimentConfig> config =
      config::ParseConfig(std::string(kConfig) + "pipeline { stages: 2 boundaries: 4 }", {});
  CATCH_REQUIRE(config.ok());
  absl::StatusOr<RunResult> result = RunPipeline(*config, {});
  CATCH_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(result.status().message(), "boundaries"));

  if (!torch::cuda::is_available()) {
    config = config::ParseConfig(
        std::string(kConfig) + "pipeline { stages: 2 devices: \"cpu\" devices: \"cuda:0\" }", {});
    CATCH_REQUIRE(config.ok());
    result = RunPipeline(*config, {});
    CATCH_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(absl::StrContains(result.status().message(), "no CUDA GPU is present"));
  }

  absl::StatusOr<config::ExperimentConfig> p3 = config::ParseConfig("mode: \"p3\"", {});
  CATCH_REQUIRE(p3.ok());
  CATCH_CHECK_FALSE(RunPipeline(*p3, {}).ok());
}

}  // namespace
}  // namespace p3::pipeline
