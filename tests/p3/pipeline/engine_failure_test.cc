// Failures of the pipeline engine: a failing stage or batch source ends the run with its
// error instead of a deadlock; bad options, CUDA without a GPU and schedules that do not
// combine with a mode are refused, saying why.
#include "p3/pipeline/engine.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/block_list_model.h"
#include "p3/pipeline/schedule.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {
namespace {

using models::Batch;
using models::BlockModel;

// Wraps a model; block `fail_block` throws in its forward (or, with `in_backward`, in its
// backward) on its `fail_at`-th call.
class FailingModel : public BlockModel {
 public:
  FailingModel(std::shared_ptr<BlockModel> inner, int64_t fail_block, int fail_at, bool in_backward)
      : inner_(register_module("inner", inner)),
        fail_block_(fail_block),
        fail_at_(fail_at),
        in_backward_(in_backward) {}
  int64_t num_blocks() const override { return inner_->num_blocks(); }
  torch::Tensor ForwardBlock(int64_t i, const torch::Tensor& x) override {
    torch::Tensor y = inner_->ForwardBlock(i, x);
    if (i == fail_block_ && ++calls_ == fail_at_) {
      if (!in_backward_) throw std::runtime_error("injected forward failure");
      y.register_hook([](torch::Tensor) -> torch::Tensor {
        throw std::runtime_error("injected backward failure");
      });
    }
    return y;
  }
  std::vector<torch::Tensor> BlockParameters(int64_t i) override {
    return inner_->BlockParameters(i);
  }
  std::string BlockName(int64_t i) const override { return inner_->BlockName(i); }
  torch::Tensor Loss(const torch::Tensor& out, const torch::Tensor& target) override {
    return inner_->Loss(out, target);
  }

 private:
  std::shared_ptr<BlockModel> inner_;
  int64_t fail_block_;
  int fail_at_;
  bool in_backward_;
  int calls_ = 0;
};

CATCH_TEST_CASE("a failing stage ends the run with an error instead of a deadlock") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const std::vector<Batch> batches = MakeBatches(12, 4, {5}, 4, 47);
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kVanilla,
                          WeightMode::kDataParallel}) {
    for (int64_t block : {0, 2, 3}) {
      for (bool in_backward : {false, true}) {
        CATCH_CAPTURE(WeightModeName(mode), block, in_backward);
        PipelineOptions options;
        options.mode = mode;
        options.num_stages = 4;
        auto factory = [&]() -> absl::StatusOr<std::shared_ptr<BlockModel>> {
          return std::static_pointer_cast<BlockModel>(
              std::make_shared<FailingModel>(*ChainFactory(dims)(), block, 5, in_backward));
        };
        absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
            PipelineEngine::Create(options, factory);
        CATCH_REQUIRE(engine.ok());
        absl::StatusOr<TrainStats> stats = (*engine)->Train(batches.size(), SourceOf(batches));
        CATCH_REQUIRE_FALSE(stats.ok());
        CATCH_CHECK(stats.status().code() == absl::StatusCode::kInternal);
        const std::string message(stats.status().message());
        CATCH_CHECK(absl::StrContains(
            message, in_backward ? "injected backward failure" : "injected forward failure"));
        CATCH_CHECK(absl::StrContains(message, "mini-batch 4"));
        CATCH_CHECK(absl::StrContains(message, in_backward ? "backward" : "forward"));
        if (mode != WeightMode::kDataParallel) {
          CATCH_CHECK(absl::StrContains(message, absl::StrCat("stage ", block)));
        }
        // The engine refuses to go on, and shuts down cleanly (twice).
        absl::StatusOr<TrainStats> again = (*engine)->Train(2, SourceOf(batches));
        CATCH_CHECK(again.status().code() == absl::StatusCode::kFailedPrecondition);
        (*engine)->Shutdown();
        (*engine)->Shutdown();
      }
    }
  }
}

CATCH_TEST_CASE("a failing batch source ends the run with its error") {
  const std::vector<int64_t> dims{5, 6, 4};
  const std::vector<Batch> batches = MakeBatches(6, 4, {5}, 4, 53);
  for (WeightMode mode : {WeightMode::kStale, WeightMode::kDataParallel}) {
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = 2;
    absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
        PipelineEngine::Create(options, ChainFactory(dims));
    CATCH_REQUIRE(engine.ok());
    absl::StatusOr<TrainStats> stats = (*engine)->Train(6, [&](int64_t i) -> absl::StatusOr<Batch> {
      if (i == 3) return absl::DataLossError("corrupt file");
      return batches[i];
    });
    CATCH_REQUIRE_FALSE(stats.ok());
    CATCH_CHECK(stats.status().code() == absl::StatusCode::kDataLoss);
    CATCH_CHECK(absl::StrContains(stats.status().message(), "mini-batch 3: corrupt file"));
  }
}

CATCH_TEST_CASE("bad options and CUDA without a GPU are errors that say why") {
  PipelineOptions options;
  options.num_stages = 5;  // the chain has 2 blocks
  absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
      PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_CHECK(engine.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(engine.status().message(), "boundaries"));

  options.num_stages = 2;
  options.boundaries = {0};
  engine = PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_CHECK(engine.status().code() == absl::StatusCode::kInvalidArgument);

  options.boundaries = {};
  options.devices = {"cpu", "tpu"};
  engine = PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_CHECK(absl::StrContains(engine.status().message(), "devices[1]"));

  // Replicas that differ (no fixed seed) are refused.
  int calls = 0;
  engine = PipelineEngine::Create(PipelineOptions{}, [&]() {
    return ChainFactory({5, 6, 4}, ++calls)();
  });
  CATCH_CHECK(absl::StrContains(engine.status().message(), "fixed seed"));

  if (!torch::cuda::is_available()) {
    absl::StatusOr<torch::Device> device = ParseStageDevice("cuda:0");
    CATCH_CHECK(device.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(absl::StrContains(device.status().message(), "no CUDA GPU is present"));
    options.devices = {"cpu", "cuda:0"};
    engine = PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
    CATCH_CHECK(absl::StrContains(engine.status().message(), "no CUDA GPU is present"));
  }
  CATCH_CHECK(ParseStageDevice("cpu").ok());
  CATCH_CHECK_FALSE(ParseStageDevice("cuda:x").ok());
}

CATCH_TEST_CASE("gpipe refuses other weight modes, 1f1b refuses micro-batches") {
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kStale,
                          WeightMode::kDataParallel}) {
    CATCH_CAPTURE(WeightModeName(mode));
    PipelineOptions options;
    options.mode = mode;
    options.schedule = PipelineSchedule::kGPipe;
    options.microbatches = 2;
    absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
        PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
    CATCH_CHECK(engine.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(absl::StrContains(engine.status().message(),
                                  "schedule: gpipe does not combine with mode " +
                                      WeightModeName(mode)));
  }
  PipelineOptions options;
  options.mode = WeightMode::kVanilla;
  options.microbatches = 2;
  absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
      PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_CHECK(absl::StrContains(engine.status().message(),
                                "microbatches: 2 with schedule 1f1b; allowed: 1"));
  // More micro-batches than samples: an error of the run, naming the mini-batch.
  options.schedule = PipelineSchedule::kGPipe;
  options.microbatches = 4;
  engine = PipelineEngine::Create(options, ChainFactory({5, 6, 4}));
  CATCH_REQUIRE(engine.ok());
  const std::vector<Batch> batches = MakeBatches(1, 3, {5}, 4, 59);
  absl::StatusOr<TrainStats> stats = (*engine)->Train(1, SourceOf(batches));
  CATCH_CHECK(stats.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(stats.status().message(),
                                "gpipe splits each mini-batch into 4 micro-batches; mini-batch 0 "
                                "has 3 samples"));
}

}  // namespace
}  // namespace p3::pipeline
