#include "tools/launcher/trace_merge.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"

namespace p3::tools {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return (fs::path(dir != nullptr ? dir : "/tmp") / name).string();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// As p3/base/trace.h writes them: metadata first, then complete events.
constexpr char kWorkerTrace[] =
    R"({"displayTimeUnit": "ms", "otherData": {"dropped_events": 2}, "traceEvents": [
{"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "worker 0"}},
{"ph": "M", "name": "thread_name", "pid": 100, "tid": 0, "args": {"name": "compute"}},
{"ph": "X", "pid": 100, "tid": 0, "ts": 1712345678901234, "dur": 1500, "name": "forward \"conv1\" [0]", "cat": "compute"}
]}
)";
constexpr char kServerTrace[] = R"({"traceEvents": [
  {"ph": "M", "name": "process_name", "pid": 200, "tid": 0, "args": {"name": "server 0"}},
  {"ph": "X", "pid": 200, "tid": 0, "ts": 1712345678902000, "dur": 30, "name": "update", "cat": "server", "args": {"slice": 3, "bytes": 160000}}
], "otherData": {"dropped_events": 1, "note": {"nested": [1, 2.5e-3, true, null]}}})";

CATCH_TEST_CASE("merging concatenates every file's events in order, metadata included") {
  const std::string worker = TempPath("worker_0.json");
  const std::string server = TempPath("server_0.json");
  const std::string merged = TempPath("trace.json");
  WriteFile(worker, kWorkerTrace);
  WriteFile(server, kServerTrace);

  absl::StatusOr<TraceMergeStats> stats = MergeTraceFiles({worker, server}, merged);
  CATCH_REQUIRE(stats.ok());
  CATCH_CHECK(stats->files == 2);
  CATCH_CHECK(stats->events == 5);
  CATCH_CHECK(stats->dropped_events == 3);

  absl::StatusOr<TraceEvents> parsed = ParseTraceEvents(ReadFile(merged));
  CATCH_REQUIRE(parsed.ok());
  CATCH_REQUIRE(parsed->events.size() == 5);
  CATCH_CHECK(absl::StrContains(parsed->events[0], "\"worker 0\""));
  CATCH_CHECK(absl::StrContains(parsed->events[1], "\"thread_name\""));
  // Events keep their members and values (written compactly): escapes and brackets
  // inside strings survive, and integers stay exact.
  CATCH_CHECK(absl::StrContains(parsed->events[2], R"("forward \"conv1\" [0]")"));
  CATCH_CHECK(absl::StrContains(parsed->events[2], "1712345678901234"));
  CATCH_CHECK(absl::StrContains(parsed->events[3], "\"server 0\""));
  CATCH_CHECK(absl::StrContains(parsed->events[4], "\"bytes\":160000"));
  CATCH_CHECK(parsed->dropped_events == 3);
  CATCH_CHECK(!fs::exists(merged + ".tmp"));
}

CATCH_TEST_CASE("the JSON Array Format and an empty trace are accepted") {
  absl::StatusOr<TraceEvents> array =
      ParseTraceEvents(R"([{"ph": "X", "ts": 1, "dur": 2, "name": "a"}, {"ph": "i", "ts": 5}])");
  CATCH_REQUIRE(array.ok());
  CATCH_CHECK(array->events.size() == 2);

  absl::StatusOr<TraceEvents> empty = ParseTraceEvents(R"({"traceEvents": []})");
  CATCH_REQUIRE(empty.ok());
  CATCH_CHECK(empty->events.empty());
}

CATCH_TEST_CASE("a malformed trace is an error naming where, and nothing is written") {
  for (const char* bad : {
           R"({"traceEvents": [{"ph": "X",}]})",  // trailing comma in an event
           R"({"traceEvents": [{"ph": "X"})",     // truncated
           R"({"traceEvents": [1, 2]})",          // events must be objects
           R"({"otherData": {}})",                // no traceEvents
           R"({"traceEvents": []} trailing)",     // text after the trace
           R"({"traceEvents": [{"name": "a
b"}]})",                                          // raw newline in a string
           "",
       }) {
    CATCH_CAPTURE(bad);
    CATCH_CHECK(!ParseTraceEvents(bad).ok());
  }
  CATCH_CHECK(absl::StrContains(
      ParseTraceEvents(R"({"traceEvents": [{"ph": "X",}]})").status().message(), "at byte"));

  const std::string good = TempPath("good.json");
  const std::string bad = TempPath("bad.json");
  const std::string merged = TempPath("bad_merge.json");
  WriteFile(good, kServerTrace);
  WriteFile(bad, R"({"traceEvents": [)");
  std::remove(merged.c_str());
  absl::StatusOr<TraceMergeStats> stats = MergeTraceFiles({good, bad}, merged);
  CATCH_REQUIRE(!stats.ok());
  CATCH_CHECK(absl::StrContains(stats.status().message(), "bad.json: not a Chrome trace"));
  CATCH_CHECK(!fs::exists(merged));
  CATCH_CHECK(!fs::exists(merged + ".tmp"));

  absl::StatusOr<TraceMergeStats> missing = MergeTraceFiles({TempPath("none.json")}, merged);
  CATCH_REQUIRE(!missing.ok());
  CATCH_CHECK(absl::StrContains(missing.status().message(), "none.json: cannot open"));
}

}  // namespace
}  // namespace p3::tools
