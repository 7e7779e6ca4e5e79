// The pipeline engine's order of operations and weight stashing, from the events and
// traces the stages report: time by kind of work, recompute, the 1F1B order and data
// flow, PipeDream's stash, SpecTrain's prediction, and GPipe's flush.
#include "p3/pipeline/engine.h"

#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/block_list_model.h"
#include "p3/base/trace.h"
#include "p3/pipeline/schedule.h"
#include "tests/p3/pipeline/engine_test_util.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {
namespace {

using models::Batch;
using models::BlockModel;

// ---------------------------------------------------------------------------------------
// Order of operations and stashing, from the events the stages report.

CATCH_TEST_CASE("every stage reports its time by kind of work and traces it on its own track") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t m = 6;
  const std::vector<Batch> batches = MakeBatches(m, 4, {5}, 4, 53);
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kPipeDream, WeightMode::kStale,
                          WeightMode::kDataParallel}) {
    CATCH_CAPTURE(WeightModeName(mode));
    TraceRecorder trace({.enabled = true, .process_name = "pipeline"});
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = n;
    options.trace = &trace;
    auto got = RunEngine(options, ChainFactory(dims), batches);
    CATCH_REQUIRE(got.ok());
    const TrainStats& stats = got->second;
    CATCH_REQUIRE(stats.stage_times.size() == static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      CATCH_CAPTURE(k);
      const StageTimes& t = stats.stage_times[k];
      CATCH_CHECK(t.forward_seconds > 0);
      CATCH_CHECK(t.backward_seconds > 0);
      CATCH_CHECK(t.update_seconds > 0);
      CATCH_CHECK(t.cpu_seconds > 0);
      CATCH_CHECK(stats.busy_seconds[k] == t.busy_seconds());
      // SpecTrain writes predicted weights on every stage at N = 4; PipeDream stashes on
      // all but the last; stale never touches them.
      if (mode == WeightMode::kStale) CATCH_CHECK(t.weights_seconds == 0);
    }
    // A forward and a backward event per mini-batch and stage, plus waits and updates.
    CATCH_CHECK(trace.size() >= 2 * n * m + n * m);
  }
}

CATCH_TEST_CASE("recompute reruns every stage's forwards but the last stage's under 1F1B") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t m = 5;
  const std::vector<Batch> batches = MakeBatches(m, 4, {5}, 4, 59);
  // Reruns traced per stage track ("recompute <unit>" events, stage_timer.h).
  const auto reruns = [&](PipelineSchedule schedule, int microbatches) {
    TraceRecorder trace({.enabled = true, .process_name = "pipeline"});
    PipelineOptions options;
    options.mode = schedule == PipelineSchedule::kOneFOneB ? WeightMode::kStale
                                                          : WeightMode::kVanilla;
    options.schedule = schedule;
    options.microbatches = microbatches;
    options.num_stages = n;
    options.recompute = true;
    options.trace = &trace;
    CATCH_REQUIRE(RunEngine(options, ChainFactory(dims), batches).ok());
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/recompute_trace.json");
    CATCH_REQUIRE(trace.WriteJson(path).ok());
    std::ifstream in(path);
    const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::map<int, int> per_track;
    for (size_t at = json.find("\"recompute "); at != std::string::npos;
         at = json.find("\"recompute ", at + 1)) {
      const size_t tid = json.rfind("\"tid\": ", at);  // an event's tid comes before its name
      per_track[std::stoi(json.substr(tid + 7))] += 1;
    }
    return per_track;
  };
  // 1F1B: the last stage's backward follows its forward at once; it keeps the
  // activations of its one mini-batch instead of rerunning.
  const std::map<int, int> one_f_one_b = reruns(PipelineSchedule::kOneFOneB, 1);
  CATCH_CHECK(one_f_one_b.size() == static_cast<size_t>(n - 1));
  for (const auto& [track, count] : one_f_one_b) CATCH_CHECK(count == m);
  // GPipe: every stage holds all micro-batches of a mini-batch, the last one too.
  const std::map<int, int> gpipe = reruns(PipelineSchedule::kGPipe, 2);
  CATCH_CHECK(gpipe.size() == static_cast<size_t>(n));
  for (const auto& [track, count] : gpipe) CATCH_CHECK(count == 2 * m);
}

CATCH_TEST_CASE("each stage runs the 1F1B order and the data flow is respected") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t m = 9;
  const std::vector<Batch> batches = MakeBatches(m, 4, {5}, 4, 37);
  for (WeightMode mode : {WeightMode::kSpecTrain, WeightMode::kStale, WeightMode::kVanilla}) {
    CATCH_CAPTURE(WeightModeName(mode));
    EventLog log;
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = n;
    options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
    auto got = RunEngine(options, ChainFactory(dims), batches);
    CATCH_REQUIRE(got.ok());
    const std::vector<PipelineEvent> events = log.events();
    CATCH_CHECK(events.size() == static_cast<size_t>(2 * n * m));
    for (int k = 0; k < n; ++k) {
      CATCH_CHECK(ScheduleString(StepsOf(events, k)) ==
                  ScheduleString(OneFOneBSchedule(n, k, m, IsPipelined(mode))));
    }
    // Position of each (stage, pass, mini-batch) in the global record.
    std::map<std::tuple<int, Pass, int64_t>, size_t> at;
    for (size_t j = 0; j < events.size(); ++j) {
      at[{events[j].stage, events[j].pass, events[j].microbatch}] = j;
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int k = 1; k < n; ++k) {
        CATCH_CHECK(at[{k - 1, Pass::kForward, i}] < at[{k, Pass::kForward, i}]);
        CATCH_CHECK(at[{k, Pass::kBackward, i}] < at[{k - 1, Pass::kBackward, i}]);
      }
      CATCH_CHECK(at[{n - 1, Pass::kForward, i}] < at[{n - 1, Pass::kBackward, i}]);
      if (mode == WeightMode::kVanilla && i + 1 < m) {
        // One mini-batch at a time: i is done everywhere before i + 1 starts.
        CATCH_CHECK(at[{0, Pass::kBackward, i}] < at[{0, Pass::kForward, i + 1}]);
      }
    }
    if (mode != WeightMode::kVanilla) {
      // Pipelining: stage 0 starts mini-batch 1 before mini-batch 0 is done.
      CATCH_CHECK(at[{0, Pass::kForward, 1}] < at[{0, Pass::kBackward, 0}]);
    }
  }
}

CATCH_TEST_CASE(
    "pipedream stashes N-k versions on stage k < N-1 and back-propagates with the forward's") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t m = 10;
  const std::vector<Batch> batches = MakeBatches(m, 4, {5}, 4, 41);
  for (WeightMode mode : {WeightMode::kPipeDream, WeightMode::kStale}) {
    EventLog log;
    PipelineOptions options;
    options.mode = mode;
    options.num_stages = n;
    options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
    CATCH_REQUIRE(RunEngine(options, ChainFactory(dims), batches).ok());
    std::vector<int64_t> max_stashed(n, 0);
    for (const PipelineEvent& e : log.events()) {
      const int64_t behind = n - e.stage - 1;
      const int64_t forward_version = std::max<int64_t>(0, e.microbatch - behind);
      max_stashed[e.stage] = std::max(max_stashed[e.stage], e.stashed);
      CATCH_CHECK(e.prediction == 0);
      if (e.pass == Pass::kForward) {
        CATCH_CHECK(e.weight_version == forward_version);
      } else if (mode == WeightMode::kPipeDream) {
        CATCH_CHECK(e.weight_version == forward_version);  // the stashed version
      } else {
        CATCH_CHECK(e.weight_version == e.microbatch);  // stale: the newest version
      }
    }
    for (int k = 0; k < n; ++k) {
      CATCH_CAPTURE(k);
      // The last stage runs each backward right after its forward: nothing to stash.
      CATCH_CHECK(max_stashed[k] == (mode == WeightMode::kPipeDream && k + 1 < n ? n - k : 0));
    }
  }
}

CATCH_TEST_CASE("spectrain applies s per stage and pass once a velocity exists") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const std::vector<Batch> batches = MakeBatches(8, 4, {5}, 4, 43);
  for (int version : {1, 2}) {
    EventLog log;
    PipelineOptions options;
    options.mode = WeightMode::kSpecTrain;
    options.spectrain_version = version;
    options.num_stages = n;
    options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
    CATCH_REQUIRE(RunEngine(options, ChainFactory(dims), batches).ok());
    for (const PipelineEvent& e : log.events()) {
      const int s = PredictionDistance(WeightMode::kSpecTrain, version, n, e.stage, e.pass);
      const bool has_velocity = e.weight_version > 0;
      CATCH_CHECK(e.prediction == (has_velocity ? s : 0));
    }
  }
}

CATCH_TEST_CASE("gpipe runs a mini-batch's forwards, then its backwards, and updates once") {
  const std::vector<int64_t> dims{5, 6, 7, 6, 4};
  const int n = 4;
  const int64_t count = 3;
  const int64_t micro = 5;
  const std::vector<Batch> batches = MakeBatches(count, 10, {5}, 4, 53);
  EventLog log;
  PipelineOptions options;
  options.mode = WeightMode::kVanilla;
  options.schedule = PipelineSchedule::kGPipe;
  options.microbatches = micro;
  options.num_stages = n;
  options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
  auto got = RunEngine(options, ChainFactory(dims), batches);
  CATCH_REQUIRE(got.ok());
  const std::vector<PipelineEvent> events = log.events();
  CATCH_CHECK(events.size() == static_cast<size_t>(2 * n * count * micro));
  std::map<std::tuple<int, Pass, int64_t>, size_t> at;  // (stage, pass, unit) -> position
  for (int k = 0; k < n; ++k) {
    std::vector<ScheduleStep> steps;
    for (size_t p = 0; p < events.size(); ++p) {
      const PipelineEvent& e = events[p];
      if (e.stage != k) continue;
      const int64_t unit = e.microbatch * micro + e.part;
      steps.push_back({e.pass, unit});
      at[{k, e.pass, unit}] = p;
      // Every micro-batch of mini-batch i, forward and backward, sees the weights after
      // exactly i updates: one synchronous update per mini-batch.
      CATCH_CHECK(e.weight_version == e.microbatch);
      CATCH_CHECK(e.prediction == 0);
      CATCH_CHECK(e.stashed == 0);
    }
    CATCH_CHECK(ScheduleString(steps) == ScheduleString(GPipeSchedule(count, micro)));
  }
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t m = 0; m < micro; ++m) {
      const int64_t j = i * micro + m;
      for (int k = 1; k < n; ++k) {
        CATCH_CHECK(at[{k - 1, Pass::kForward, j}] < at[{k, Pass::kForward, j}]);
        CATCH_CHECK(at[{k, Pass::kBackward, j}] < at[{k - 1, Pass::kBackward, j}]);
      }
    }
    if (i + 1 < count) {
      // Flush: mini-batch i is done everywhere before i + 1 starts.
      CATCH_CHECK(at[{0, Pass::kBackward, i * micro + micro - 1}] <
                  at[{0, Pass::kForward, (i + 1) * micro}]);
    }
  }
  // Busy time is measured per stage; the bubble is a share.
  CATCH_REQUIRE(got->second.busy_seconds.size() == static_cast<size_t>(n));
  for (double b : got->second.busy_seconds) CATCH_CHECK(b > 0);
  CATCH_CHECK(got->second.seconds > 0);
  CATCH_CHECK(BubbleFraction(got->second) >= 0);
  CATCH_CHECK(BubbleFraction(got->second) < 1);
}

}  // namespace
}  // namespace p3::pipeline
