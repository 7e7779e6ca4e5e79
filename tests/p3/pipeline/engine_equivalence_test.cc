// The pipeline engine against single-device training: vanilla bit for bit,
// data_parallel on the union batch, both with a learning-rate schedule, and gpipe on the
// whole mini-batch.
#include "p3/pipeline/engine.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "models/block_list_model.h"
#include "models/zoo.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/stage_sgd.h"
#include "tests/p3/pipeline/engine_test_util.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {
namespace {

using models::Batch;
using models::BlockModel;

std::vector<torch::Tensor> TrainSingleDevice(const PipelineEngine::ModelFactory& factory,
                                             const std::vector<Batch>& batches, const SgdOptions& o,
                                             torch::Tensor* probe_output,
                                             const torch::Tensor& probe) {
  std::shared_ptr<BlockModel> model = *factory();
  torch::optim::SGD opt(
      model->parameters(),
      torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  int64_t t = 0;
  for (const Batch& b : batches) {
    // The schedule's rate, set as mode `local` sets it (worker/trainer.cc).
    for (auto& group : opt.param_groups()) group.options().set_lr(ScheduledLr(o.schedule, o.lr, t));
    ++t;
    opt.zero_grad();
    model->Loss(model->forward(b.input), b.target).backward();
    opt.step();
  }
  if (probe_output != nullptr) {
    torch::NoGradGuard no_grad;
    model->eval();
    *probe_output = model->forward(probe);
  }
  return Clones(model->parameters());
}

CATCH_TEST_CASE("vanilla equals single-device training bit for bit") {
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  {
    const std::vector<Batch> batches = MakeBatches(12, 16, {12}, 10, 23);
    torch::Tensor probe = torch::randn({5, 12});
    torch::Tensor want_out;
    const std::vector<torch::Tensor> want =
        TrainSingleDevice(ZooFactory("mlp"), batches, sgd, &want_out, probe);
    for (int n : {1, 2, 3}) {
      CATCH_CAPTURE(n);
      PipelineOptions options;
      options.mode = WeightMode::kVanilla;
      options.num_stages = n;
      options.sgd = sgd;
      absl::StatusOr<std::unique_ptr<PipelineEngine>> engine =
          PipelineEngine::Create(options, ZooFactory("mlp"));
      CATCH_REQUIRE(engine.ok());
      CATCH_REQUIRE((*engine)->Train(batches.size(), SourceOf(batches)).ok());
      CATCH_CHECK(MaxAbsDiff((*engine)->Parameters(), want) == 0);
      absl::StatusOr<torch::Tensor> out = (*engine)->Infer(probe);
      CATCH_REQUIRE(out.ok());
      CATCH_CHECK(torch::equal(*out, want_out));
    }
  }
  {
    // small_cnn, one block per stage (convolutions, pooling and the flatten hand-over).
    const std::vector<Batch> batches = MakeBatches(4, 8, {1, 28, 28}, 10, 29);
    const std::vector<torch::Tensor> want =
        TrainSingleDevice(ZooFactory("small_cnn"), batches, sgd, nullptr, {});
    PipelineOptions options;
    options.mode = WeightMode::kVanilla;
    options.num_stages = 4;
    options.sgd = sgd;
    auto got = RunEngine(options, ZooFactory("small_cnn"), batches);
    CATCH_REQUIRE(got.ok());
    CATCH_CHECK(MaxAbsDiff(got->first, want) == 0);
  }
}

CATCH_TEST_CASE("data_parallel equals single-device training on the union batch") {
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  // 10 samples over 3 replicas: shards of 4, 3 and 3, weighted by size.
  const std::vector<Batch> batches = MakeBatches(8, 10, {12}, 10, 31);
  const std::vector<torch::Tensor> want =
      TrainSingleDevice(ZooFactory("mlp"), batches, sgd, nullptr, {});
  for (int n : {1, 2, 3}) {
    CATCH_CAPTURE(n);
    PipelineOptions options;
    options.mode = WeightMode::kDataParallel;
    options.num_stages = n;
    options.sgd = sgd;
    auto got = RunEngine(options, ZooFactory("mlp"), batches);
    CATCH_REQUIRE(got.ok());
    CATCH_CHECK(MaxAbsDiff(got->first, want) < 1e-5);
  }
}

CATCH_TEST_CASE("with a learning-rate schedule, vanilla and data_parallel equal single-device") {
  SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  sgd.schedule.kind = LrScheduleKind::kCosine;
  sgd.schedule.t_max = 8;
  sgd.schedule.eta_min = 0.005;
  sgd.schedule.warmup_iterations = 3;
  sgd.schedule.warmup_start_factor = 0.2;
  const std::vector<Batch> batches = MakeBatches(8, 10, {12}, 10, 37);
  const std::vector<torch::Tensor> want =
      TrainSingleDevice(ZooFactory("mlp"), batches, sgd, nullptr, {});
  const SgdOptions constant{0.05, 0.9, 0, 1e-4, false};
  // The schedule matters, so the comparisons below could fail.
  CATCH_CHECK(MaxAbsDiff(TrainSingleDevice(ZooFactory("mlp"), batches, constant, nullptr, {}),
                         want) > 1e-4);
  for (WeightMode mode : {WeightMode::kVanilla, WeightMode::kDataParallel}) {
    CATCH_CAPTURE(WeightModeName(mode));
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = 2;
    options.sgd = sgd;
    auto got = RunEngine(options, ZooFactory("mlp"), batches);
    CATCH_REQUIRE(got.ok());
    CATCH_CHECK(MaxAbsDiff(got->first, want) < (mode == WeightMode::kVanilla ? 1e-12 : 1e-5));
  }
}

// GPipe's update is single-device training's on the whole mini-batch, but its gradient
// is summed in another order: per micro-batch (each micro-batch's mean loss times its
// share of the samples, back-propagated separately), then accumulated over the
// micro-batches. In float32 that moves a gradient by a few units in the last place;
// after these 4-8 SGD steps the parameters differed by at most 3e-8 (mlp, small_cnn,
// row_lstm; engine_equivalence_test -s prints each case's difference). 1e-6 bounds that with room
// to spare and is far below what a wrong accumulation does (an update per micro-batch,
// or unweighted micro-batch losses, move parameters by > 1e-3: checked below for the
// first).
constexpr double kGPipeTolerance = 1e-6;

CATCH_TEST_CASE("gpipe equals single-device training on the whole mini-batch") {
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  {
    // 10 samples per mini-batch: 3 micro-batches of 4, 3, 3; 4 of 3, 3, 2, 2.
    const std::vector<Batch> batches = MakeBatches(8, 10, {12}, 10, 43);
    const std::vector<torch::Tensor> want =
        TrainSingleDevice(ZooFactory("mlp"), batches, sgd, nullptr, {});
    for (int n : {1, 2, 3}) {
      for (int64_t micro : {1, 2, 3, 4, 10}) {
        CATCH_CAPTURE(n, micro);
        PipelineOptions options;
        options.mode = WeightMode::kVanilla;
        options.schedule = PipelineSchedule::kGPipe;
        options.microbatches = micro;
        options.num_stages = n;
        options.sgd = sgd;
        auto got = RunEngine(options, ZooFactory("mlp"), batches);
        CATCH_REQUIRE(got.ok());
        const double diff = MaxAbsDiff(got->first, want);
        CATCH_INFO("max |gpipe - single device| = " << diff);
        if (micro == 1) {
          CATCH_CHECK(diff == 0);  // one micro-batch: the same sums as single-device
        } else {
          CATCH_CHECK(diff < kGPipeTolerance);
        }
        // The mini-batch's loss: the micro-batches' weighted.
        CATCH_REQUIRE(got->second.losses.size() == batches.size());
        CATCH_CHECK(std::isfinite(got->second.losses[0]));
      }
    }
    // Updating after every micro-batch instead is clearly different: the check above
    // can fail.
    std::vector<Batch> halves;
    for (const Batch& b : batches) {
      halves.push_back({b.input.narrow(0, 0, 5), b.target.narrow(0, 0, 5)});
      halves.push_back({b.input.narrow(0, 5, 5), b.target.narrow(0, 5, 5)});
    }
    CATCH_CHECK(MaxAbsDiff(TrainSingleDevice(ZooFactory("mlp"), halves, sgd, nullptr, {}), want) >
                1e-3);
  }
  for (const std::string name : {"small_cnn", "row_lstm"}) {
    // One block per stage (row_lstm: lstm.3 and fc share the last), 8 samples in 3
    // micro-batches of 3, 3, 2.
    CATCH_CAPTURE(name);
    const std::vector<Batch> batches = MakeBatches(4, 8, {1, 28, 28}, 10, 47);
    const std::vector<torch::Tensor> want =
        TrainSingleDevice(ZooFactory(name), batches, sgd, nullptr, {});
    PipelineOptions options;
    options.mode = WeightMode::kVanilla;
    options.schedule = PipelineSchedule::kGPipe;
    options.microbatches = 3;
    options.num_stages = 4;
    options.sgd = sgd;
    auto got = RunEngine(options, ZooFactory(name), batches);
    CATCH_REQUIRE(got.ok());
    const double diff = MaxAbsDiff(got->first, want);
    CATCH_INFO("max |gpipe - single device| = " << diff);
    CATCH_CHECK(diff < kGPipeTolerance);
  }
}

}  // namespace
}  // namespace p3::pipeline
