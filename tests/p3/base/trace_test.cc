#include "p3/base/trace.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "p3/base/file_util.h"

namespace p3 {
namespace {

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

CATCH_TEST_CASE("a trace holds complete events on named tracks in Chrome's format") {
  TraceRecorder trace({.enabled = true, .process_name = "worker \"0\"", .pid = 100});
  const int compute = trace.Track("compute");
  const int send = trace.Track("send to server 1");
  CATCH_CHECK(trace.Track("compute") == compute);
  const absl::Time t0 = absl::FromUnixMicros(1000000);
  trace.Complete(compute, "forward conv1", "forward", t0, t0 + absl::Microseconds(250));
  trace.Complete(send, "gradient 3", "send", t0, t0 + absl::Microseconds(10), "\"slice\": 3");
  CATCH_CHECK(trace.size() == 2);
  const std::string path = TempPath("trace_test.json");
  CATCH_REQUIRE(trace.WriteJson(path).ok());
  const std::string json = ReadFile(path).value();
  CATCH_CHECK(json.find("\"traceEvents\"") != std::string::npos);
  CATCH_CHECK(json.find("\"name\": \"worker \\\"0\\\"\"") != std::string::npos);  // escaped
  CATCH_CHECK(json.find("\"name\": \"send to server 1\"") != std::string::npos);
  CATCH_CHECK(json.find("\"ts\": 1000000, \"dur\": 250, \"name\": \"forward conv1\"") !=
              std::string::npos);
  CATCH_CHECK(json.find("\"args\": {\"slice\": 3}") != std::string::npos);
}

CATCH_TEST_CASE("a disabled trace records nothing") {
  TraceRecorder trace({.enabled = false});
  trace.Complete(trace.Track("x"), "e", "c", absl::Now(), absl::Now());
  CATCH_CHECK(trace.size() == 0);
}

CATCH_TEST_CASE("events beyond the bound are dropped and counted") {
  TraceRecorder trace({.enabled = true, .max_events = 2});
  for (int i = 0; i < 5; ++i) trace.Complete(0, "e", "c", absl::Now(), absl::Now());
  CATCH_CHECK(trace.size() == 2);
  const std::string path = TempPath("trace_drop.json");
  CATCH_REQUIRE(trace.WriteJson(path).ok());
  CATCH_CHECK(ReadFile(path).value().find("\"dropped_events\": 3") != std::string::npos);
}

}  // namespace
}  // namespace p3
