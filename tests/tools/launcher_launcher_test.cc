// Whole runs of the Launcher against the fake server and worker (tests/tools/fake_p3_*.cc),
// which listen on OS-chosen loopback ports and publish them in port files.
#include "tools/launcher/launcher.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "p3/file_util.h"
#include "proto/config.h"
#include "tests/testing/temp_dir.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

using p3::testing::FreshDir;

// The fakes, from the test's runfiles (its working directory).
LauncherOptions FakeOptions() {
  LauncherOptions options;
  options.config_path = "(test)";
  options.server_binary = fs::absolute("tests/tools/fake_p3_server").string();
  options.worker_binary = fs::absolute("tests/tools/fake_p3_worker").string();
  options.working_dir = fs::current_path().string();
  options.kill_grace = absl::Seconds(30);
  return options;
}

config::ExperimentConfig Config(const std::string& out, std::vector<std::string> overrides) {
  overrides.push_back("output_dir=" + out);
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig("", overrides);
  CATCH_INFO(config.status().message());
  CATCH_REQUIRE(config.ok());
  return *config;
}

Json ReadJson(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  CATCH_REQUIRE(text.ok());
  return Json::parse(*text);
}

CATCH_TEST_CASE("a run starts every process, merges the traces and writes summary.json") {
  CATCH_REQUIRE(fs::exists("tests/tools/fake_p3_worker"));
  const std::string out = FreshDir("run_ok");
  const config::ExperimentConfig config = Config(
      out, {"cluster.workers=2", "cluster.servers=2", "training.iterations=6", "trace=true"});
  {
    Launcher launcher(FakeOptions(), config);
    CATCH_CHECK(launcher.Run() == 0);
  }
  const Json summary = ReadJson(out + "/summary.json");
  CATCH_CHECK(summary["iterations"] == 6);
  CATCH_CHECK(summary["server_processes"] == 2);
  CATCH_REQUIRE(summary["workers_results"].size() == 2);
  CATCH_CHECK(summary["workers_results"][1]["rank"] == 1);
  CATCH_CHECK(summary["trace"] == out + "/trace.json");
  const Json trace = ReadJson(out + "/trace.json");
  CATCH_CHECK(trace["otherData"]["merged_files"] == 4);
  CATCH_CHECK(absl::StartsWith(*ReadFile(out + "/config.textproto"),
                               "# Resolved experiment config written by launch_cluster"));

  // --collect reads the same folder back.
  fs::remove(out + "/summary.json");
  fs::remove(out + "/trace.json");
  {
    Launcher collector(FakeOptions(), config);
    CATCH_CHECK(collector.Collect() == 0);
  }
  CATCH_CHECK(ReadJson(out + "/summary.json")["workers_results"].size() == 2);
  CATCH_CHECK(fs::exists(out + "/trace.json"));

  // A malformed result file fails the collection, naming the worker.
  CATCH_REQUIRE(WriteFileAtomically(out + "/results/worker_1.json", "{\"rank\": 1}").ok());
  fs::remove(out + "/summary.json");
  {
    Launcher collector(FakeOptions(), config);
    CATCH_CHECK(collector.Collect() == 1);
  }
  CATCH_CHECK(!fs::exists(out + "/summary.json"));
}

CATCH_TEST_CASE("a failing worker stops the others; no summary is written") {
  const std::string out = FreshDir("run_fails");
  const config::ExperimentConfig config =
      Config(out, {"cluster.workers=2", "cluster.servers=2", "training.iterations=50"});
  setenv("FAKE_P3_WORKER_FAIL_RANK", "1", 1);
  int status = -1;
  {
    Launcher launcher(FakeOptions(), config);
    status = launcher.Run();
  }
  unsetenv("FAKE_P3_WORKER_FAIL_RANK");
  CATCH_CHECK(status == 1);
  CATCH_CHECK(!fs::exists(out + "/summary.json"));
  CATCH_CHECK(fs::exists(out + "/logs/worker_1.log"));
}

CATCH_TEST_CASE("a server that never publishes its port fails the run at the peer timeout") {
  const std::string out = FreshDir("run_no_port");
  const config::ExperimentConfig config =
      Config(out, {"cluster.workers=1", "cluster.servers=1", "cluster.peer_timeout_s=0.2"});
  setenv("FAKE_P3_SERVER_MODE", "no_port", 1);
  int status = -1;
  {
    Launcher launcher(FakeOptions(), config);
    status = launcher.Run();
  }
  unsetenv("FAKE_P3_SERVER_MODE");
  CATCH_CHECK(status == 1);
  CATCH_CHECK(!fs::exists(out + "/logs/worker_0.log"));  // No worker was started.
}

}  // namespace
}  // namespace p3::tools::launcher
