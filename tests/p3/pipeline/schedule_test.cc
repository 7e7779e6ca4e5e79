// The pipeline's scheduling parts, which build without libtorch: the 1F1B order,
// SpecTrain's version differences, the partitioner, the bounded queue, and the
// "pipeline" section of experiment configs.
#include "p3/pipeline/schedule.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "p3/pipeline/bounded_queue.h"
#include "p3/pipeline/partition.h"
#include "proto/config.h"

namespace p3::pipeline {
namespace {

std::string Schedule(int n, int k, int64_t m, bool pipelined = true) {
  return ScheduleString(OneFOneBSchedule(n, k, m, pipelined));
}

CATCH_TEST_CASE("1F1B runs N-k-1 warm-up forwards, then alternates, then drains") {
  CATCH_CHECK(Schedule(4, 0, 6) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  CATCH_CHECK(Schedule(4, 1, 6) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  CATCH_CHECK(Schedule(4, 2, 6) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  CATCH_CHECK(Schedule(4, 3, 6) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  CATCH_CHECK(Schedule(2, 0, 3) == "F0 F1 B0 F2 B1 B2");
  CATCH_CHECK(Schedule(2, 1, 3) == "F0 B0 F1 B1 F2 B2");
}

CATCH_TEST_CASE("1F1B with fewer mini-batches than stages only warms up and drains") {
  CATCH_CHECK(Schedule(4, 0, 2) == "F0 F1 B0 B1");
  CATCH_CHECK(Schedule(4, 0, 0).empty());
  CATCH_CHECK(Schedule(1, 0, 3) == "F0 B0 F1 B1 F2 B2");
}

CATCH_TEST_CASE("vanilla's schedule has no warm-up: one mini-batch in flight per stage") {
  for (int k = 0; k < 4; ++k) {
    CATCH_CHECK(Schedule(4, k, 3, /*pipelined=*/false) == "F0 B0 F1 B1 F2 B2");
    CATCH_CHECK(WarmupForwards(4, k, 3, false) == 0);
  }
  CATCH_CHECK(WarmupForwards(4, 0, 10, true) == 3);
  CATCH_CHECK(WarmupForwards(4, 3, 10, true) == 0);
}

CATCH_TEST_CASE("every stage's forward of mini-batch i sees N-k-1 fewer updates than sequential") {
  for (int n : {2, 3, 4}) {
    for (int k = 0; k < n; ++k) {
      int64_t updates = 0;
      for (const ScheduleStep& step : OneFOneBSchedule(n, k, 12, true)) {
        if (step.pass == Pass::kBackward) {
          CATCH_CHECK(updates == step.microbatch);  // the backward sees every earlier update
          ++updates;
        } else {
          CATCH_CHECK(updates == std::max<int64_t>(0, step.microbatch - (n - k - 1)));
        }
      }
    }
  }
}

CATCH_TEST_CASE("SpecTrain v1's version difference for every stage of N = 2 and 4") {
  const WeightMode st = WeightMode::kSpecTrain;
  // N = 2: forward floor(k/2) + N-k-1 = 1, 0; backward floor(k/2) = 0, 0.
  CATCH_CHECK(PredictionDistance(st, 1, 2, 0, Pass::kForward) == 1);
  CATCH_CHECK(PredictionDistance(st, 1, 2, 1, Pass::kForward) == 0);
  CATCH_CHECK(PredictionDistance(st, 1, 2, 0, Pass::kBackward) == 0);
  CATCH_CHECK(PredictionDistance(st, 1, 2, 1, Pass::kBackward) == 0);
  // N = 4: forward 3, 2, 2, 1; backward 0, 0, 1, 1 (references.md).
  const int forward4[] = {3, 2, 2, 1};
  const int backward4[] = {0, 0, 1, 1};
  for (int k = 0; k < 4; ++k) {
    CATCH_CAPTURE(k);
    CATCH_CHECK(PredictionDistance(st, 1, 4, k, Pass::kForward) == forward4[k]);
    CATCH_CHECK(PredictionDistance(st, 1, 4, k, Pass::kBackward) == backward4[k]);
  }
}

CATCH_TEST_CASE("SpecTrain v2's version difference: forward N-k-1, backward reuses it") {
  const WeightMode st = WeightMode::kSpecTrain;
  CATCH_CHECK(PredictionDistance(st, 2, 2, 0, Pass::kForward) == 1);
  CATCH_CHECK(PredictionDistance(st, 2, 2, 1, Pass::kForward) == 0);
  CATCH_CHECK(PredictionDistance(st, 2, 2, 0, Pass::kBackward) == 1);
  CATCH_CHECK(PredictionDistance(st, 2, 2, 1, Pass::kBackward) == 0);
  const int forward4[] = {3, 2, 1, 0};
  for (int k = 0; k < 4; ++k) {
    CATCH_CAPTURE(k);
    CATCH_CHECK(PredictionDistance(st, 2, 4, k, Pass::kForward) == forward4[k]);
    CATCH_CHECK(PredictionDistance(st, 2, 4, k, Pass::kBackward) == forward4[k]);
  }
}

CATCH_TEST_CASE("only stages whose passes use other weights keep the real weights apart") {
  const WeightMode st = WeightMode::kSpecTrain;
  // v1, N = 2: stage 0 predicts its forward (s = 1), stage 1 predicts nothing.
  CATCH_CHECK(KeepsRealWeightsApart(st, 1, 2, 0));
  CATCH_CHECK_FALSE(KeepsRealWeightsApart(st, 1, 2, 1));
  // v1, N = 4: the last stage predicts s = 1 for both passes.
  for (int k = 0; k < 4; ++k) CATCH_CHECK(KeepsRealWeightsApart(st, 1, 4, k));
  // v2, N = 4: s = N-k-1, 0 on the last stage.
  for (int k = 0; k < 4; ++k) CATCH_CHECK(KeepsRealWeightsApart(st, 2, 4, k) == (k < 3));
  // PipeDream stashes on every stage but the last, whose backward follows its forward.
  for (int k = 0; k < 4; ++k) {
    CATCH_CHECK(KeepsRealWeightsApart(WeightMode::kPipeDream, 1, 4, k) == (k < 3));
  }
  for (WeightMode mode : {WeightMode::kStale, WeightMode::kVanilla, WeightMode::kDataParallel}) {
    for (int k = 0; k < 4; ++k) CATCH_CHECK_FALSE(KeepsRealWeightsApart(mode, 1, 4, k));
  }
}

CATCH_TEST_CASE("modes other than spectrain never predict") {
  for (WeightMode mode : {WeightMode::kPipeDream, WeightMode::kStale, WeightMode::kVanilla,
                          WeightMode::kDataParallel}) {
    for (int k = 0; k < 4; ++k) {
      CATCH_CHECK(PredictionDistance(mode, 1, 4, k, Pass::kForward) == 0);
      CATCH_CHECK(PredictionDistance(mode, 2, 4, k, Pass::kBackward) == 0);
    }
  }
}

CATCH_TEST_CASE("a config allows exactly the engine's weight modes, in its order") {
  CATCH_CHECK(std::vector<std::string>(std::begin(config::kPipelineWeights),
                                       std::end(config::kPipelineWeights)) == WeightModeNames());
}

CATCH_TEST_CASE("weight modes parse by name and unknown names list the allowed ones") {
  for (const std::string& name : WeightModeNames()) {
    absl::StatusOr<WeightMode> mode = ParseWeightMode(name);
    CATCH_REQUIRE(mode.ok());
    CATCH_CHECK(WeightModeName(*mode) == name);
  }
  absl::StatusOr<WeightMode> bad = ParseWeightMode("gpipe");
  CATCH_REQUIRE_FALSE(bad.ok());
  CATCH_CHECK(absl::StrContains(bad.status().message(),
                                "spectrain, pipedream, stale, vanilla, data_parallel"));
  CATCH_CHECK(IsPipelined(WeightMode::kStale));
  CATCH_CHECK_FALSE(IsPipelined(WeightMode::kVanilla));
  CATCH_CHECK_FALSE(IsPipelined(WeightMode::kDataParallel));
}

CATCH_TEST_CASE("the balanced partition minimises the most expensive stage") {
  absl::StatusOr<std::vector<int64_t>> cut = BalancedBoundaries({1, 4, 2, 1}, 2);
  CATCH_REQUIRE(cut.ok());
  CATCH_CHECK(*cut == std::vector<int64_t>{2});
  CATCH_CHECK(StageCosts({1, 4, 2, 1}, *cut) == std::vector<double>{5, 3});

  cut = BalancedBoundaries({5, 1, 1, 1, 1, 1, 5}, 3);
  CATCH_REQUIRE(cut.ok());
  CATCH_CHECK(*cut == std::vector<int64_t>{1, 6});  // 5 | 5 | 5

  cut = BalancedBoundaries({1, 1, 1, 1}, 4);
  CATCH_REQUIRE(cut.ok());
  CATCH_CHECK(*cut == std::vector<int64_t>{1, 2, 3});

  cut = BalancedBoundaries({3, 1, 1, 1}, 1);
  CATCH_REQUIRE(cut.ok());
  CATCH_CHECK(cut->empty());
}

CATCH_TEST_CASE("the balanced partition matches brute force on many cost lists") {
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<double>((state >> 8) % 1000) / 10.0;
  };
  for (int trial = 0; trial < 200; ++trial) {
    const int blocks = 2 + trial % 7;
    const int stages = 1 + trial % std::min(blocks, 4);
    std::vector<double> costs;
    for (int i = 0; i < blocks; ++i) costs.push_back(next());
    absl::StatusOr<std::vector<int64_t>> cut = BalancedBoundaries(costs, stages);
    CATCH_REQUIRE(cut.ok());
    CATCH_REQUIRE(ValidateBoundaries(*cut, blocks).ok());
    std::vector<double> got = StageCosts(costs, *cut);
    const double got_max = *std::max_element(got.begin(), got.end());
    // Brute force over every choice of stages-1 cut points.
    double best = 1e300;
    const int masks = 1 << (blocks - 1);
    for (int mask = 0; mask < masks; ++mask) {
      if (__builtin_popcount(mask) != stages - 1) continue;
      std::vector<int64_t> b;
      for (int i = 0; i < blocks - 1; ++i) {
        if (mask & (1 << i)) b.push_back(i + 1);
      }
      std::vector<double> c = StageCosts(costs, b);
      best = std::min(best, *std::max_element(c.begin(), c.end()));
    }
    CATCH_CHECK(got_max == Approx(best));
  }
}

CATCH_TEST_CASE("partitions that leave a stage empty are rejected") {
  CATCH_CHECK_FALSE(BalancedBoundaries({1, 2}, 3).ok());
  CATCH_CHECK_FALSE(BalancedBoundaries({1, -2}, 1).ok());
  CATCH_CHECK_FALSE(BalancedBoundaries({1, 2}, 0).ok());
  CATCH_CHECK(ValidateBoundaries({1, 3}, 4).ok());
  CATCH_CHECK_FALSE(ValidateBoundaries({3, 1}, 4).ok());
  CATCH_CHECK_FALSE(ValidateBoundaries({0}, 4).ok());
  CATCH_CHECK_FALSE(ValidateBoundaries({4}, 4).ok());
  CATCH_CHECK(absl::StrContains(ValidateBoundaries({2, 2}, 4).message(), "boundary 1"));
  CATCH_CHECK((StageRanges({1, 3}, 4) == std::vector<StageRange>{{0, 1}, {1, 3}, {3, 4}}));
}

// Catch2's assertions are not thread-safe: the worker threads below only record what
// they saw, and the main thread asserts on it after join().

CATCH_TEST_CASE("bounded queue hands items over in order and blocks the producer when full") {
  BoundedQueue<int> queue(2);
  int pushed = 0;
  size_t max_size = 0;  // the largest size the producer saw right after a Push()
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) {
      if (!queue.Push(i)) return;
      ++pushed;
      max_size = std::max(max_size, queue.size());
    }
  });
  std::vector<int> popped;
  for (int i = 0; i < 100; ++i) {
    std::optional<int> item = queue.Pop();
    if (!item.has_value()) break;
    popped.push_back(*item);
  }
  producer.join();
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[i] = i;
  CATCH_CHECK(popped == expected);
  CATCH_CHECK(pushed == 100);
  CATCH_CHECK(max_size <= 2);
  CATCH_CHECK(queue.blocked() == 0);
}

CATCH_TEST_CASE("a bounded queue's producer waits while it is full until a Pop() makes room") {
  BoundedQueue<int> queue(1);
  CATCH_REQUIRE(queue.Push(1));
  bool pushed = false;
  std::thread producer([&] { pushed = queue.Push(2); });
  queue.AwaitBlocked(1);  // the producer found the queue full and waits
  CATCH_CHECK(queue.blocked() == 1);
  CATCH_CHECK(queue.size() == 1);
  std::optional<int> first = queue.Pop();
  producer.join();
  CATCH_CHECK(pushed);
  CATCH_CHECK(first == std::optional<int>(1));
  CATCH_CHECK(queue.Pop() == std::optional<int>(2));
  CATCH_CHECK(queue.blocked() == 0);
}

CATCH_TEST_CASE("closing a bounded queue wakes a blocked consumer and a blocked producer") {
  BoundedQueue<int> empty(1);
  BoundedQueue<int> full(1);
  CATCH_REQUIRE(full.Push(7));
  std::optional<int> popped = 1;
  bool push_result = true;
  std::thread consumer([&] { popped = empty.Pop(); });
  std::thread producer([&] { push_result = full.Push(8); });
  // Close only once both really wait: what is tested is the wake-up, not a refusal.
  empty.AwaitBlocked(1);
  full.AwaitBlocked(1);
  CATCH_CHECK(empty.blocked() == 1);
  CATCH_CHECK(full.blocked() == 1);
  empty.Close();
  full.Close();
  consumer.join();
  producer.join();
  CATCH_CHECK_FALSE(popped.has_value());
  CATCH_CHECK_FALSE(push_result);
  CATCH_CHECK(empty.blocked() == 0);
  CATCH_CHECK(full.blocked() == 0);
  CATCH_CHECK_FALSE(full.Pop().has_value());
  empty.Close();  // idempotent
  CATCH_CHECK_FALSE(empty.Push(3));
}

CATCH_TEST_CASE("gpipe runs every micro-batch's forward, then their backwards, per mini-batch") {
  CATCH_CHECK(ScheduleString(GPipeSchedule(2, 3)) == "F0 F1 F2 B0 B1 B2 F3 F4 F5 B3 B4 B5");
  CATCH_CHECK(ScheduleString(GPipeSchedule(3, 1)) == "F0 B0 F1 B1 F2 B2");
  CATCH_CHECK(GPipeSchedule(0, 4).empty());
  // (K - 1) / (M + K - 1)
  CATCH_CHECK(GPipeBubbleFraction(4, 4) == Approx(3.0 / 7.0));
  CATCH_CHECK(GPipeBubbleFraction(2, 8) == Approx(1.0 / 9.0));
  CATCH_CHECK(GPipeBubbleFraction(1, 3) == 0);
}

CATCH_TEST_CASE("schedules parse by name") {
  CATCH_CHECK(*ParsePipelineSchedule("1f1b") == PipelineSchedule::kOneFOneB);
  CATCH_CHECK(*ParsePipelineSchedule("gpipe") == PipelineSchedule::kGPipe);
  CATCH_CHECK(*ParsePipelineSchedule("interleaved_1f1b") == PipelineSchedule::kInterleaved1F1B);
  CATCH_CHECK(PipelineScheduleName(PipelineSchedule::kGPipe) == "gpipe");
  CATCH_CHECK(PipelineScheduleName(PipelineSchedule::kInterleaved1F1B) == "interleaved_1f1b");
  absl::StatusOr<PipelineSchedule> zb = ParsePipelineSchedule("zb");
  CATCH_CHECK(zb.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StrContains(zb.status().message(),
                                "allowed: \"1f1b\", \"gpipe\", \"interleaved_1f1b\""));
}

// Runs every stage's steps in its order, a step as soon as its input exists (a forward of
// virtual stage v > 0 after v-1's forward of the same micro-batch, a backward after the
// forward on its stage and, below the last virtual stage, v+1's backward), as the
// engine's blocking queues do; returns false if the stages wait for each other forever.
// Virtual stage of a step on stage d: chunk * K + d.
bool RunsToTheEnd(const std::vector<std::vector<ScheduleStep>>& orders, int chunks) {
  const int k = static_cast<int>(orders.size());
  const int last = k * chunks - 1;
  std::set<std::tuple<int, int, int64_t>> done;  // (pass, virtual stage, micro-batch)
  std::vector<size_t> next(k, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int d = 0; d < k; ++d) {
      while (next[d] < orders[d].size()) {
        const ScheduleStep& s = orders[d][next[d]];
        const int v = s.chunk * k + d;
        const bool ready =
            s.pass == Pass::kForward
                ? v == 0 || done.count({0, v - 1, s.microbatch}) > 0
                : done.count({0, v, s.microbatch}) > 0 &&
                      (v == last || done.count({1, v + 1, s.microbatch}) > 0);
        if (!ready) break;
        done.insert({s.pass == Pass::kForward ? 0 : 1, v, s.microbatch});
        ++next[d];
        moved = true;
      }
    }
  }
  for (int d = 0; d < k; ++d) {
    if (next[d] != orders[d].size()) return false;
  }
  return true;
}

CATCH_TEST_CASE("interleaved 1F1B follows Megatron's order and never waits forever") {
  // K = 2, V = 2, M = 2 (= K: all forwards first, chunk by chunk; backwards in reverse).
  CATCH_CHECK(ScheduleString(InterleavedSchedule(2, 0, 2, 1, 2), true) ==
              "F0c0 F1c0 F0c1 F1c1 B0c1 B1c1 B0c0 B1c0");
  // K = 2, V = 2, M = 4: stage 0 warms up with 2 (K-1) + (V-1) K = 4 forwards, stage 1
  // with 2; micro-batches in groups of K per chunk.
  CATCH_CHECK(ScheduleString(InterleavedSchedule(2, 0, 2, 1, 4), true) ==
              "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 B2c1 B3c1 B2c0 B3c0");
  CATCH_CHECK(ScheduleString(InterleavedSchedule(2, 1, 2, 1, 4), true) ==
              "F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 F3c1 B3c1 B2c0 B3c0");
  // Mini-batch 1 follows mini-batch 0 with micro-batches 4..7.
  const std::vector<ScheduleStep> two = InterleavedSchedule(2, 1, 2, 2, 4);
  CATCH_REQUIRE(two.size() == 32);
  CATCH_CHECK(two[16] == (ScheduleStep{Pass::kForward, 4, 0}));
  CATCH_CHECK(two[31] == (ScheduleStep{Pass::kBackward, 7, 0}));
  for (int k : {1, 2, 3, 4}) {
    for (int chunks : {1, 2, 3}) {
      for (int64_t m : {k, 2 * k, 3 * k}) {
        CATCH_CAPTURE(k, chunks, m);
        std::vector<std::vector<ScheduleStep>> orders;
        for (int d = 0; d < k; ++d) {
          orders.push_back(InterleavedSchedule(k, d, chunks, 2, m));
          // Every chunk runs each micro-batch's forward once and its backward once, each
          // in micro-batch order.
          for (int c = 0; c < chunks; ++c) {
            std::vector<int64_t> forwards, backwards;
            for (const ScheduleStep& s : orders.back()) {
              if (s.chunk != c) continue;
              (s.pass == Pass::kForward ? forwards : backwards).push_back(s.microbatch);
            }
            std::vector<int64_t> want(2 * m);
            for (int64_t j = 0; j < 2 * m; ++j) want[j] = j;
            CATCH_CHECK(forwards == want);
            CATCH_CHECK(backwards == want);
          }
        }
        CATCH_CHECK(RunsToTheEnd(orders, chunks));
      }
    }
  }
  // The check can fail: every stage running its backwards first waits forever.
  std::vector<std::vector<ScheduleStep>> backwards_first;
  for (int d = 0; d < 2; ++d) {
    std::vector<ScheduleStep> steps = InterleavedSchedule(2, d, 2, 1, 4);
    std::stable_partition(steps.begin(), steps.end(),
                          [](const ScheduleStep& s) { return s.pass == Pass::kBackward; });
    backwards_first.push_back(steps);
  }
  CATCH_CHECK_FALSE(RunsToTheEnd(backwards_first, 2));
  // (K - 1) / (V M + K - 1); V = 1 is GPipe's.
  CATCH_CHECK(InterleavedBubbleFraction(4, 2, 4) == Approx(3.0 / 11.0));
  CATCH_CHECK(InterleavedBubbleFraction(4, 1, 4) == Approx(GPipeBubbleFraction(4, 4)));
  CATCH_CHECK(InterleavedBubbleFraction(1, 3, 2) == 0);
}

CATCH_TEST_CASE("pipeline configs get defaults and name bad fields") {
  absl::StatusOr<config::ExperimentConfig> c = config::ParseConfig("mode: \"pipeline\"", {});
  CATCH_REQUIRE(c.ok());
  CATCH_CHECK(c->pipeline().weights() == "spectrain");
  CATCH_CHECK(c->pipeline().spectrain_version() == 1);
  CATCH_CHECK(c->pipeline().stages() == 2);
  CATCH_CHECK(c->pipeline().profile_batches() == 3);
  CATCH_CHECK(c->pipeline().schedule() == "1f1b");
  CATCH_CHECK(c->pipeline().microbatches() == 1);
  CATCH_CHECK(c->pipeline().train_samples() == 0);
  // Under gpipe the weights default to vanilla and the micro-batches to the stages.
  c = config::ParseConfig("mode: \"pipeline\" pipeline { schedule: \"gpipe\" stages: 3 }", {});
  CATCH_REQUIRE(c.ok());
  CATCH_CHECK(c->pipeline().weights() == "vanilla");
  CATCH_CHECK(c->pipeline().microbatches() == 3);
  // Other modes keep their resolved config free of the pipeline section.
  absl::StatusOr<config::ExperimentConfig> p3 = config::ParseConfig("mode: \"p3\"", {});
  CATCH_REQUIRE(p3.ok());
  CATCH_CHECK_FALSE(p3->has_pipeline());

  c = config::ParseConfig("mode: \"pipeline\"",
                          {"pipeline.weights=pipedream", "pipeline.stages=4"});
  CATCH_REQUIRE(c.ok());
  CATCH_CHECK(c->pipeline().weights() == "pipedream");
  CATCH_CHECK(c->pipeline().stages() == 4);

  auto error = [](const std::string& text) {
    absl::StatusOr<config::ExperimentConfig> bad = config::ParseConfig(text, {});
    return bad.ok() ? std::string("(no error)") : std::string(bad.status().message());
  };
  CATCH_CHECK(absl::StrContains(error("mode: \"pipeline\" pipeline { weights: \"gpipe\" }"),
                                "pipeline.weights: \"gpipe\" is not allowed; allowed: "
                                "\"spectrain\", \"pipedream\", \"stale\", \"vanilla\", "
                                "\"data_parallel\""));
  CATCH_CHECK(absl::StrContains(error("mode: \"pipeline\" pipeline { spectrain_version: 3 }"),
                                "pipeline.spectrain_version: 3 is out of range; allowed 1..2"));
  CATCH_CHECK(absl::StrContains(error("mode: \"pipeline\" pipeline { stages: 2 devices: \"cpu\" }"),
                                "pipeline.devices: 1 devices for 2 stages"));
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" pipeline { stages: 2 devices: \"cpu\" devices: \"gpu1\" }"),
      "pipeline.devices[1]: \"gpu1\" is not allowed"));
  CATCH_CHECK(error("mode: \"pipeline\" pipeline { stages: 2 devices: \"cpu\" devices: "
                    "\"cuda:1\" }") == "(no error)");
  CATCH_CHECK(absl::StrContains(error("mode: \"pipeline\" pipeline { stages: 3 boundaries: 2 }"),
                                "pipeline.boundaries: 1 boundaries for 3 stages"));
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" pipeline { stages: 3 boundaries: 2 boundaries: 2 }"),
      "pipeline.boundaries[1]: 2 is out of range; allowed > 2"));
  // interleaved_1f1b: weights vanilla, 2 chunks and micro-batches = stages by default.
  c = config::ParseConfig("mode: \"pipeline\" pipeline { schedule: \"interleaved_1f1b\" stages: 3 }",
                          {});
  CATCH_REQUIRE(c.ok());
  CATCH_CHECK(c->pipeline().weights() == "vanilla");
  CATCH_CHECK(c->pipeline().microbatches() == 3);
  CATCH_CHECK(c->pipeline().chunks() == 2);
  CATCH_CHECK(c->pipeline().recompute() == false);
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" pipeline { schedule: \"interleaved_1f1b\" weights: \"pipedream\" }"),
      "pipeline.weights: \"pipedream\" does not combine with schedule \"interleaved_1f1b\""));
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" pipeline { schedule: \"interleaved_1f1b\" stages: 2 "
            "microbatches: 3 }"),
      "pipeline.microbatches: 3 is not a multiple of pipeline.stages (2)"));
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" pipeline { schedule: \"interleaved_1f1b\" chunks: 1 }"),
      "pipeline.chunks: 1 is out of range; allowed 2..64"));
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" pipeline { schedule: \"gpipe\" chunks: 2 }"),
      "pipeline.chunks: 2 with schedule \"gpipe\"; allowed: 1"));
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" pipeline { weights: \"data_parallel\" recompute: true }"),
      "pipeline.recompute: true does not combine with weights \"data_parallel\""));
  CATCH_CHECK(error("mode: \"pipeline\" pipeline { weights: \"pipedream\" recompute: true }") ==
              "(no error)");
  CATCH_CHECK(absl::StrContains(error("mode: \"pipeline\" pipeline { schedule: \"zb\" }"),
                                "pipeline.schedule: \"zb\" is not allowed"));
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" pipeline { schedule: \"gpipe\" weights: \"spectrain\" }"),
      "pipeline.weights: \"spectrain\" does not combine with schedule \"gpipe\""));
  CATCH_CHECK(absl::StrContains(error("mode: \"pipeline\" pipeline { microbatches: 4 }"),
                                "pipeline.microbatches: 4 with schedule \"1f1b\"; allowed: 1"));
  CATCH_CHECK(absl::StrContains(
      error("mode: \"pipeline\" training { batch_size: 8 } pipeline { schedule: \"gpipe\" "
            "microbatches: 9 }"),
      "pipeline.microbatches: 9 is out of range; allowed 1..8"));
  CATCH_CHECK(error("mode: \"pipeline\" training { batch_size: 8 } pipeline { schedule: "
                    "\"gpipe\" microbatches: 8 }") == "(no error)");
  CATCH_CHECK(absl::StrContains(error("mode: \"pipeline\" pipeline { train_samples: -1 }"),
                                "pipeline.train_samples: -1 is out of range; allowed >= 0"));
  CATCH_CHECK(absl::StrContains(error("mode: \"pipeline\" optimizer { name: \"adam\" }"),
                                "optimizer.name: mode \"pipeline\" supports only \"sgd\""));
}

}  // namespace
}  // namespace p3::pipeline
