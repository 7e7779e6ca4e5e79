// A pipeline run's figures and reports, which build without libtorch: the steady-state
// rate, the epoch record, the run's summary, and the JSON, CSV and EPOCH line.
#include "p3/pipeline/run_stats.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "p3/pipeline/run_result.h"

namespace p3::pipeline {
namespace {

CATCH_TEST_CASE("the steady rate counts the mini-batches after the warm-up over their time") {
  // Completion times of 6 mini-batches of 10 samples: a slow fill, then one every 0.5 s.
  const std::vector<double> done{2.0, 2.5, 3.0, 3.5, 4.0, 4.5};
  // Warm-up 2: mini-batches 3..5 (30 samples) between t = 3.0 and t = 4.5.
  CATCH_CHECK(SteadyRate(done, 10, 2) == Approx(20.0));
  // No warm-up: 5 mini-batches after the first, 50 samples in 2.5 s.
  CATCH_CHECK(SteadyRate(done, 10, 0) == Approx(20.0));
  CATCH_CHECK(SteadyRate(done, 10, -3) == Approx(20.0));
  // A warm-up beyond the epoch leaves the last two mini-batches: 10 samples in 0.5 s.
  CATCH_CHECK(SteadyRate(done, 10, 100) == Approx(20.0));
  CATCH_CHECK(SteadyRate({2.0, 3.0}, 10, 5) == Approx(10.0));
  // One mini-batch: its own time; nothing measurable: 0.
  CATCH_CHECK(SteadyRate({0.5}, 10, 3) == Approx(20.0));
  CATCH_CHECK(SteadyRate({0.0}, 10, 0) == 0);
  CATCH_CHECK(SteadyRate({}, 10, 0) == 0);
  CATCH_CHECK(SteadyRate({1.0, 1.0}, 10, 0) == 0);
}

CATCH_TEST_CASE("the tail mean averages the last values of a run") {
  CATCH_CHECK(TailMean({1, 2, 3, 4}, 2) == Approx(3.5));
  CATCH_CHECK(TailMean({1, 2, 3, 4}, 20) == Approx(2.5));
  CATCH_CHECK(TailMean({}, 20) == 0);
  CATCH_CHECK(TailMean({5}, 0) == 0);
}

CATCH_TEST_CASE("an epoch record holds the mean loss, the epoch's time and its steady rate") {
  const EpochRecord r = EpochRecordFromStats(3, {2.0, 1.0, 0.0}, {1.0, 2.0, 4.0}, 8, 1);
  CATCH_CHECK(r.epoch == 3);
  CATCH_CHECK(r.iterations == 3);
  CATCH_CHECK(r.train_loss == Approx(1.0));
  CATCH_CHECK(r.seconds == Approx(4.0));
  CATCH_CHECK(r.samples_per_second == Approx(4.0));  // 8 samples between t = 2 and t = 4
  CATCH_CHECK_FALSE(r.test_accuracy.has_value());
  const EpochRecord empty = EpochRecordFromStats(1, {}, {}, 8, 1);
  CATCH_CHECK(empty.iterations == 0);
  CATCH_CHECK(empty.train_loss == 0);
  CATCH_CHECK(empty.seconds == 0);
}

CATCH_TEST_CASE("a run's summary is the median epoch rate and the mean of the last 20 losses") {
  RunResult result;
  for (double rate : {30.0, 10.0, 20.0, 1000.0}) {
    EpochRecord e;
    e.samples_per_second = rate;
    result.epochs.push_back(e);
  }
  std::vector<double> losses(25, 9.0);  // the first 5 fall outside the window
  for (size_t i = 5; i < losses.size(); ++i) losses[i] = (i % 2 == 0) ? 1.0 : 3.0;
  SummarizeRun(losses, &result);
  CATCH_CHECK(result.samples_per_second == Approx(25.0));  // median of 10, 20, 30, 1000
  CATCH_CHECK(result.final_loss == Approx(2.0));
  CATCH_CHECK(kFinalLossWindow == 20);
}

CATCH_TEST_CASE("results are written as JSON, CSV and EPOCH lines, a diverged loss as null") {
  RunResult result;
  result.name = "a \"quoted\" run";
  result.weights = "spectrain";
  result.stages = 2;
  result.devices = {"cpu", "cpu"};
  result.boundaries = {2};
  result.stage_blocks = {"conv1+conv2", "fc1+fc2"};
  result.final_loss = std::numeric_limits<double>::quiet_NaN();
  EpochRecord e;
  e.epoch = 1;
  e.iterations = 12;
  e.train_loss = 0.5;
  e.seconds = 1.25;
  e.samples_per_second = 300;
  e.test_accuracy = 0.875;
  result.epochs.push_back(e);
  e.epoch = 2;
  e.test_accuracy.reset();
  result.epochs.push_back(e);

  const nlohmann::json json = nlohmann::json::parse(result.ToJson());
  CATCH_CHECK(json["name"] == "a \"quoted\" run");
  CATCH_CHECK(json["weights"] == "spectrain");
  CATCH_CHECK(json["devices"] == nlohmann::json({"cpu", "cpu"}));
  CATCH_CHECK(json["boundaries"] == nlohmann::json({2}));
  CATCH_CHECK(json["final_loss"].is_null());
  CATCH_REQUIRE(json["epochs"].size() == 2);
  CATCH_CHECK(json["epochs"][0] == nlohmann::json({{"epoch", 1},
                                                   {"iterations", 12},
                                                   {"train_loss", 0.5},
                                                   {"seconds", 1.25},
                                                   {"samples_per_second", 300.0},
                                                   {"test_accuracy", 0.875},
                                                   {"bubble_fraction", 0.0}}));
  CATCH_CHECK(json["epochs"][1]["test_accuracy"].is_null());
  CATCH_CHECK(result.EpochsCsv() ==
              "epoch,iterations,train_loss,seconds,samples_per_second,test_accuracy\n"
              "1,12,0.500000,1.250,300.000,0.8750\n"
              "2,12,0.500000,1.250,300.000,\n");
  CATCH_CHECK(FormatEpochLine(result.epochs[0]) ==
              "EPOCH epoch=1 train_loss=0.5000 seconds=1.25 samples_per_second=300.0 "
              "test_accuracy=0.8750");
  CATCH_CHECK(absl::EndsWith(FormatEpochLine(result.epochs[1]), "test_accuracy=null"));
}

}  // namespace
}  // namespace p3::pipeline
