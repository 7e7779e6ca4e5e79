// Whole runs of the Launcher against the fake server and worker (tests/tools/fake_p3_*.cc),
// which listen on OS-chosen loopback ports and publish them in port files.
#include "tools/launcher/launcher.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "p3/base/file_util.h"
#include "p3/base/json_file.h"
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
  absl::StatusOr<Json> json = ReadJsonFile(path);
  CATCH_CAPTURE(json.status().ToString());
  CATCH_REQUIRE(json.ok());
  return *std::move(json);
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
  const Json failed = ReadJson(out + "/summary.json");
  CATCH_CHECK(failed["status"] == "failed");
  CATCH_CHECK(absl::StrContains(failed["error"].get<std::string>(),
                                "worker 1 wrote a result file without \"iterations\""));
  CATCH_CHECK(failed["first_failure"].is_null());  // No process failed.
  CATCH_CHECK(failed["iterations"] == 6);          // Rank 0's result is still there.
}

// Writes the exit record p3_slurm_task.sh leaves for a process of a Slurm job.
void WriteExitRecord(const std::string& out, const std::string& name, const std::string& node,
                     int exit_status, int signal, double end) {
  const std::string text =
      "{\"process\": \"" + name + "\", \"node\": \"" + node +
      "\", \"host\": \"vm\", \"exit_status\": " + std::to_string(exit_status) +
      ", \"signal\": " + std::to_string(signal) +
      ", \"start_unix\": 1764575000.5, \"end_unix\": " + std::to_string(1764575000.5 + end) + "}\n";
  CATCH_REQUIRE(WriteFileAtomically(out + "/results/" + name + ".exit.json", text).ok());
}

CATCH_TEST_CASE("--collect after a Slurm job shows how each process ended, from its exit record") {
  const std::string out = FreshDir("collect_slurm");
  const config::ExperimentConfig config =
      Config(out, {"cluster.workers=2", "cluster.servers=2", "training.iterations=4"});
  {
    Launcher launcher(FakeOptions(), config);
    CATCH_REQUIRE(launcher.Run() == 0);
  }
  fs::remove(out + "/summary.json");
  // Every task recorded exit 0: servers too are "exit 0" (not "not started").
  WriteExitRecord(out, "server_0", "n1", 0, 0, 3.0);
  WriteExitRecord(out, "server_1", "n2", 0, 0, 3.0);
  WriteExitRecord(out, "worker_0", "n1", 0, 0, 2.9);
  WriteExitRecord(out, "worker_1", "n2", 0, 0, 2.9);
  {
    Launcher collector(FakeOptions(), config);
    CATCH_CHECK(collector.Collect() == 0);
  }
  Json summary = ReadJson(out + "/summary.json");
  CATCH_CHECK(summary["status"] == "ok");
  CATCH_REQUIRE(summary["processes"].size() == 4);
  for (const Json& p : summary["processes"]) {
    CATCH_CAPTURE(p.dump());
    CATCH_CHECK(p["status"] == "exit 0");
    CATCH_CHECK(p["outcome"] == "ok");
  }
  CATCH_CHECK(summary["processes"][1]["node"] == "n2");
  CATCH_CHECK(summary["processes"][0]["seconds"] == 3.0);

  // Worker 1 failed first; srun then ended server 1 (SIGTERM) and server 0 failed on its
  // own; worker 0's task was killed with SIGKILL and recorded nothing.
  fs::remove(out + "/results/worker_0.exit.json");
  WriteExitRecord(out, "worker_1", "n2", 3, 0, 1.0);
  WriteExitRecord(out, "server_1", "n2", 0, 15, 1.5);
  WriteExitRecord(out, "server_0", "n1", 1, 0, 1.2);
  {
    Launcher collector(FakeOptions(), config);
    CATCH_CHECK(collector.Collect() == 1);
  }
  summary = ReadJson(out + "/summary.json");
  CATCH_CHECK(summary["status"] == "failed");
  CATCH_CHECK(summary["first_failure"]["process"] == "worker_1");
  CATCH_CHECK(summary["first_failure"]["node"] == "n2");
  CATCH_CHECK(summary["first_failure"]["status"] == "exit 3");
  CATCH_CHECK(summary["first_failure"]["seconds_after_start"] == 1.0);
  CATCH_REQUIRE(summary["follow_on_failures"].size() == 1);
  CATCH_CHECK(summary["follow_on_failures"][0]["process"] == "server_0");
  CATCH_CHECK(summary["follow_on_failures"][0]["seconds_after_first"] == 0.2);
  std::vector<std::string> outcomes;
  for (const Json& p : summary["processes"]) outcomes.push_back(p["outcome"]);
  CATCH_CHECK(outcomes == std::vector<std::string>{"follow-on failure",
                                                   "stopped after the first failure", "result file",
                                                   "first failure"});
}

CATCH_TEST_CASE("a failing worker stops the others; summary.json names it the first failure") {
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
  CATCH_CHECK(fs::exists(out + "/logs/worker_1.log"));
  const Json summary = ReadJson(out + "/summary.json");
  CATCH_CHECK(summary["status"] == "failed");
  CATCH_CHECK(summary["first_failure"]["process"] == "worker_1");
  CATCH_CHECK(summary["first_failure"]["status"] == "exit 3");
  CATCH_CHECK(summary["first_failure"]["last_log_line"] ==
              "fake_p3_worker: injected failure on rank 1");
  CATCH_CHECK(summary["follow_on_failures"].empty());  // The others were stopped.
}

CATCH_TEST_CASE("a server dying mid-run is the first failure; the others follow or are stopped") {
  const std::string out = FreshDir("run_server_dies");
  const config::ExperimentConfig config =
      Config(out, {"cluster.workers=2", "cluster.servers=2", "training.iterations=100"});
  // Server 1 kills itself 100 ms after both workers connected; the workers notice at
  // their next iteration (50 ms each), server 0 when a worker disconnects.
  setenv("FAKE_P3_SERVER_DIE_INDEX", "1", 1);
  setenv("FAKE_P3_SERVER_DIE_AFTER_MS", "100", 1);
  setenv("FAKE_P3_SERVER_ABORT_ON_DISCONNECT", "1", 1);
  setenv("FAKE_P3_WORKER_ITERATION_MS", "50", 1);
  int status = -1;
  {
    LauncherOptions options = FakeOptions();
    options.kill_grace = absl::Seconds(2);
    Launcher launcher(options, config);
    status = launcher.Run();
  }
  for (const char* name : {"FAKE_P3_SERVER_DIE_INDEX", "FAKE_P3_SERVER_DIE_AFTER_MS",
                           "FAKE_P3_SERVER_ABORT_ON_DISCONNECT", "FAKE_P3_WORKER_ITERATION_MS"}) {
    unsetenv(name);
  }
  CATCH_CHECK(status == 1);
  const Json summary = ReadJson(out + "/summary.json");
  CATCH_CHECK(summary["status"] == "failed");
  CATCH_CHECK(summary["first_failure"]["process"] == "server_1");
  CATCH_CHECK(summary["first_failure"]["status"] == "signal 9 (Killed)");
  CATCH_REQUIRE(summary["processes"].size() == 4);
  for (const Json& p : summary["processes"]) {
    if (p["name"] == "server_1") continue;
    CATCH_CAPTURE(p.dump());
    CATCH_CHECK(
        (p["outcome"] == "follow-on failure" || p["outcome"] == "stopped after the first failure"));
  }
  for (const Json& f : summary["follow_on_failures"]) {
    CATCH_CHECK(f["seconds_after_first"].get<double>() >= 0);
  }
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
  const Json summary = ReadJson(out + "/summary.json");
  CATCH_CHECK(summary["first_failure"].is_null());  // No process failed: the launcher gave up.
  CATCH_CHECK(absl::StrContains(summary["error"].get<std::string>(), "server 0 (pid "));
  CATCH_CHECK(summary["processes"][0]["outcome"] == "stopped by the launcher");
  CATCH_CHECK(summary["processes"][1]["outcome"] == "not started");
}

}  // namespace
}  // namespace p3::tools::launcher
