// Interleaved 1F1B (PipelineSchedule::kInterleaved1F1B): K stage threads, V model chunks
// each. It updates once per mini-batch after all micro-batches, so it must train as one
// device does on the whole mini-batch (up to the order of floating-point sums, as GPipe);
// every thread must run InterleavedSchedule()'s order over its virtual stages; the
// combinations that make no sense are refused with the reason.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "models/block_list_model.h"
#include "models/zoo.h"
#include "p3/pipeline/engine.h"
#include "p3/pipeline/schedule.h"
#include "p3/base/status_macros.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {
namespace {

using models::Batch;
using models::BlockModel;

constexpr double kTolerance = 1e-6;  // as GPipe's test: only the sums' order differs

// Blocks: Linear(d_b, d_{b+1}) + tanh (none on the last).
std::vector<torch::Tensor> TrainSingleDevice(const PipelineEngine::ModelFactory& factory,
                                             const std::vector<Batch>& batches,
                                             const SgdOptions& o) {
  std::shared_ptr<BlockModel> model = *factory();
  torch::optim::SGD opt(
      model->parameters(),
      torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  for (const Batch& b : batches) {
    opt.zero_grad();
    model->Loss(model->forward(b.input), b.target).backward();
    opt.step();
  }
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

PipelineOptions Interleaved(int stages, int chunks, int64_t microbatches) {
  PipelineOptions options;
  options.mode = WeightMode::kVanilla;
  options.schedule = PipelineSchedule::kInterleaved1F1B;
  options.num_stages = stages;
  options.chunks = chunks;
  options.microbatches = microbatches;
  options.sgd = {0.05, 0.9, 0, 1e-4, false};
  return options;
}

absl::StatusOr<std::vector<torch::Tensor>> RunEngine(const PipelineOptions& options,
                                                     const PipelineEngine::ModelFactory& factory,
                                                     const std::vector<Batch>& batches,
                                                     TrainStats* stats = nullptr) {
  P3_ASSIGN_OR_RETURN(std::unique_ptr<PipelineEngine> engine,
                      PipelineEngine::Create(options, factory));
  P3_ASSIGN_OR_RETURN(TrainStats got,
                      engine->Train(batches.size(), [&](int64_t i) -> absl::StatusOr<Batch> {
                        return batches.at(i);
                      }));
  if (stats != nullptr) *stats = got;
  return engine->Parameters();
}

CATCH_TEST_CASE("interleaved 1F1B equals single-device training on the whole mini-batch") {
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  struct Case {
    std::string model;
    int stages, chunks;
    int64_t microbatches;
    std::vector<int64_t> shape;
  };
  // mlp: 3 blocks; small_cnn: 4; row_lstm: 5 (lstm.0-3, fc).
  const std::vector<Case> cases = {
      {"mlp", 1, 3, 2, {12}},           {"mlp", 1, 2, 1, {12}},
      {"small_cnn", 2, 2, 2, {1, 28, 28}}, {"small_cnn", 2, 2, 4, {1, 28, 28}},
      {"row_lstm", 2, 2, 4, {1, 28, 28}},  {"row_lstm", 2, 2, 2, {1, 28, 28}},
  };
  for (const Case& c : cases) {
    CATCH_CAPTURE(c.model, c.stages, c.chunks, c.microbatches);
    const std::vector<Batch> batches = MakeBatches(4, 8, c.shape, 10, 53);
    const std::vector<torch::Tensor> want = TrainSingleDevice(ZooFactory(c.model), batches, sgd);
    TrainStats stats;
    absl::StatusOr<std::vector<torch::Tensor>> got = RunEngine(
        Interleaved(c.stages, c.chunks, c.microbatches), ZooFactory(c.model), batches, &stats);
    CATCH_INFO(got.status().ToString());
    CATCH_REQUIRE(got.ok());
    const double diff = MaxAbsDiff(*got, want);
    CATCH_INFO("max |interleaved - single device| = " << diff);
    if (c.microbatches == 1) {
      CATCH_CHECK(diff == 0);
    } else {
      CATCH_CHECK(diff < kTolerance);
    }
    CATCH_CHECK(stats.busy_seconds.size() == static_cast<size_t>(c.stages));
  }
  // A deeper chain: 4 stages of 2 chunks, 2 stages of 4 chunks, micro-batches 1-3 per stage.
  const std::vector<int64_t> dims{6, 9, 8, 7, 9, 8, 7, 6, 5};  // 8 blocks
  const std::vector<Batch> batches = MakeBatches(5, 12, {6}, 5, 59);
  const std::vector<torch::Tensor> want = TrainSingleDevice(ChainFactory(dims), batches, sgd);
  for (auto [stages, chunks, microbatches] :
       std::vector<std::tuple<int, int, int64_t>>{{4, 2, 4}, {4, 2, 8}, {2, 4, 2}, {2, 4, 6},
                                                  {2, 3, 4}, {3, 2, 3}, {3, 2, 6}}) {
    CATCH_CAPTURE(stages, chunks, microbatches);
    absl::StatusOr<std::vector<torch::Tensor>> got =
        RunEngine(Interleaved(stages, chunks, microbatches), ChainFactory(dims), batches);
    CATCH_INFO(got.status().ToString());
    CATCH_REQUIRE(got.ok());
    CATCH_CHECK(MaxAbsDiff(*got, want) < kTolerance);
  }
  // Updating after every micro-batch would be far off, so the checks above can fail.
  std::vector<Batch> quarters;
  for (const Batch& b : batches) {
    for (int q = 0; q < 4; ++q) {
      quarters.push_back({b.input.narrow(0, 3 * q, 3), b.target.narrow(0, 3 * q, 3)});
    }
  }
  CATCH_CHECK(MaxAbsDiff(TrainSingleDevice(ChainFactory(dims), quarters, sgd), want) > 1e-3);
}

CATCH_TEST_CASE("each interleaved stage runs its chunks in Megatron's order, one update each") {
  const std::vector<int64_t> dims{6, 9, 8, 7, 9, 8, 7, 6, 5};
  const std::vector<Batch> batches = MakeBatches(3, 12, {6}, 5, 61);
  const int k = 2;
  const int chunks = 4;
  const int64_t m = 4;
  EventLog log;
  PipelineOptions options = Interleaved(k, chunks, m);
  options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
  CATCH_REQUIRE(RunEngine(options, ChainFactory(dims), batches).ok());
  // Events of a thread come from that thread in its order; the virtual stage says which.
  std::map<int, std::vector<ScheduleStep>> by_thread;
  for (const PipelineEvent& e : log.events()) {
    const int64_t j = e.microbatch * m + e.part;
    by_thread[e.stage % k].push_back({e.pass, j, e.stage / k});
    // One update per virtual stage and mini-batch: every micro-batch of mini-batch i
    // sees the weights after i updates.
    CATCH_CHECK(e.weight_version == e.microbatch);
  }
  for (int d = 0; d < k; ++d) {
    CATCH_CAPTURE(d);
    CATCH_CHECK(ScheduleString(by_thread[d], true) ==
                ScheduleString(InterleavedSchedule(k, d, chunks, 3, m), true));
  }
}

CATCH_TEST_CASE("interleaved 1F1B refuses weight modes, chunk and micro-batch counts that do not fit") {
  auto error = [](PipelineOptions options, const PipelineEngine::ModelFactory& factory) {
    absl::StatusOr<std::unique_ptr<PipelineEngine>> engine = PipelineEngine::Create(options, factory);
    return engine.ok() ? std::string("(no error)") : std::string(engine.status().message());
  };
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kStale,
                          WeightMode::kDataParallel}) {
    PipelineOptions options = Interleaved(2, 2, 2);
    options.mode = mode;
    CATCH_CHECK(absl::StartsWith(
        error(options, ZooFactory("small_cnn")),
        absl::StrCat("schedule: interleaved_1f1b does not combine with mode ",
                     WeightModeName(mode))));
  }
  CATCH_CHECK(error(Interleaved(2, 1, 2), ZooFactory("small_cnn")) ==
              "chunks: 1 is out of range for interleaved_1f1b; allowed 2..64");
  CATCH_CHECK(absl::StartsWith(error(Interleaved(2, 2, 3), ZooFactory("small_cnn")),
                               "microbatches: 3 is not a multiple of num_stages (2)"));
  CATCH_CHECK(error(Interleaved(2, 3, 2), ZooFactory("small_cnn")) ==
              "num_stages * chunks = 6 stages for a model of 4 blocks; allowed: at most one "
              "stage per block");
  PipelineOptions gpipe = Interleaved(2, 2, 2);
  gpipe.schedule = PipelineSchedule::kGPipe;
  CATCH_CHECK(absl::StartsWith(error(gpipe, ZooFactory("small_cnn")),
                               "chunks: 2 with schedule gpipe; allowed: 1"));
  CATCH_CHECK(error(Interleaved(2, 2, 2), ZooFactory("small_cnn")) == "(no error)");
}

}  // namespace
}  // namespace p3::pipeline
