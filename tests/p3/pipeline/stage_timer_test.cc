#include "p3/pipeline/stage_timer.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "p3/base/file_util.h"

namespace p3::pipeline {
namespace {

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double Spin(double seconds) {
  const double start = ThreadCpuSeconds();
  volatile double x = 0;  // keeps the loop from being optimised away
  while (ThreadCpuSeconds() - start < seconds) x = x + 1;
  return x;
}

CATCH_TEST_CASE("a stage timer charges each lap to its kind of work") {
  StageTimes times;
  StageTimer timer(nullptr, "stage 0", &times);
  SleepMs(20);
  timer.Lap(WorkKind::kWait, "wait");
  SleepMs(30);
  timer.Lap(WorkKind::kForward, "forward 0");
  timer.Skip();
  timer.Lap(WorkKind::kBackward, "backward 0");
  // Sleeps last at least as long as asked: lower bounds only, whatever the load.
  CATCH_CHECK(times.wait_seconds >= 0.020);
  CATCH_CHECK(times.forward_seconds >= 0.030);
  CATCH_CHECK(times.backward_seconds < times.forward_seconds);
  CATCH_CHECK(times.update_seconds == 0);
  CATCH_CHECK(times.weights_seconds == 0);
  CATCH_CHECK(times.busy_seconds() ==
              times.forward_seconds + times.backward_seconds);  // waits are not busy
}

CATCH_TEST_CASE("a stage timer adds the thread's CPU time, not its sleeping time") {
  StageTimes times;
  StageTimer timer(nullptr, "stage 0", &times);
  SleepMs(50);
  Spin(0.03);
  timer.Finish();
  CATCH_CHECK(times.cpu_seconds >= 0.03);
  CATCH_CHECK(times.cpu_seconds < 0.03 + 0.045);  // the 50 ms asleep are not counted
}

CATCH_TEST_CASE("stage times add up over calls") {
  StageTimes a{1, 2, 3, 4, 5, 6};
  a += StageTimes{0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
  CATCH_CHECK(a.forward_seconds == 1.5);
  CATCH_CHECK(a.cpu_seconds == 6.5);
  CATCH_CHECK(a.busy_seconds() == 1.5 + 2.5 + 3.5 + 4.5);
}

CATCH_TEST_CASE("with a trace, every lap is an event on the stage's track, named and categorised") {
  TraceRecorder trace({.enabled = true, .process_name = "pipeline", .pid = 0});
  StageTimes times0;
  StageTimes times1;
  StageTimer t0(&trace, "stage 0", &times0);
  StageTimer t1(&trace, "stage 1", &times1);
  t0.Lap(WorkKind::kForward, "forward 3");
  t1.Lap(WorkKind::kWeights, "weights");
  t1.Lap(WorkKind::kUpdate, "update");
  CATCH_CHECK(trace.size() == 3);
  const std::string path = "/tmp/stage_timer_test_" + std::to_string(::getpid()) + ".json";
  CATCH_REQUIRE(trace.WriteJson(path).ok());
  absl::StatusOr<std::string> json = ReadFile(path);
  std::remove(path.c_str());
  CATCH_REQUIRE(json.ok());
  CATCH_CHECK(json->find("\"stage 0\"") != std::string::npos);
  CATCH_CHECK(json->find("\"stage 1\"") != std::string::npos);
  CATCH_CHECK(json->find("\"forward 3\"") != std::string::npos);
  CATCH_CHECK(json->find("\"cat\": \"weights\"") != std::string::npos);
  CATCH_CHECK(json->find("\"cat\": \"update\"") != std::string::npos);
}

}  // namespace
}  // namespace p3::pipeline
