#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "proto/config.h"
#include "tests/testing/temp_dir.h"
#include "tools/launcher/run_layout.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

using p3::testing::FreshDir;

config::ExperimentConfig Config(const std::vector<std::string>& overrides) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig("", overrides);
  CATCH_REQUIRE(config.ok());
  return *config;
}

CATCH_TEST_CASE("servers come first, then workers by rank, each with its files") {
  const std::string work = FreshDir("layout");
  const config::ExperimentConfig config =
      Config({"cluster.workers=3", "cluster.servers=2", "output_dir=out/x", "trace=true"});
  RunLayoutOptions options;
  options.working_dir = work;
  absl::StatusOr<RunLayout> layout = MakeRunLayout(config, options);
  CATCH_REQUIRE(layout.ok());
  CATCH_CHECK(layout->output_dir == work + "/out/x");
  CATCH_CHECK(layout->config_path == work + "/out/x/config.textproto");
  CATCH_CHECK(layout->summary_path == work + "/out/x/summary.json");
  CATCH_REQUIRE(layout->processes.size() == 5);
  const ProcessFiles& server1 = layout->processes[1];
  CATCH_CHECK(server1.name() == "server_1");
  CATCH_CHECK(server1.port_file == work + "/out/x/ports/server_1.port");
  CATCH_CHECK(server1.result_file.empty());
  const ProcessFiles& worker2 = layout->processes[4];
  CATCH_CHECK(worker2.name() == "worker_2");
  CATCH_CHECK(worker2.log_path == work + "/out/x/logs/worker_2.log");
  CATCH_CHECK(worker2.result_file == work + "/out/x/results/worker_2.json");
  CATCH_CHECK(worker2.records_file == work + "/out/x/records/worker_2.csv");
  CATCH_CHECK(worker2.trace_file == work + "/out/x/traces/worker_2.json");
  for (const char* sub : {"logs", "ports", "results", "records", "traces"}) {
    CATCH_CHECK(fs::is_directory(work + "/out/x/" + sub));
  }
}

CATCH_TEST_CASE("files of an earlier run are removed unless asked to keep them") {
  const std::string out = FreshDir("layout_stale");
  const config::ExperimentConfig config = Config({"output_dir=" + out});
  RunLayoutOptions options;
  options.clear_stale = false;
  absl::StatusOr<RunLayout> first = MakeRunLayout(config, options);
  CATCH_REQUIRE(first.ok());
  std::ofstream(first->summary_path) << "{}";
  std::ofstream(first->processes.back().result_file) << "{}";
  CATCH_REQUIRE(MakeRunLayout(config, options).ok());
  CATCH_CHECK(fs::exists(first->summary_path));
  CATCH_CHECK(fs::exists(first->processes.back().result_file));

  options.clear_stale = true;
  CATCH_REQUIRE(MakeRunLayout(config, options).ok());
  CATCH_CHECK(!fs::exists(first->summary_path));
  CATCH_CHECK(!fs::exists(first->processes.back().result_file));
  CATCH_CHECK(!fs::exists(out + "/traces"));  // trace: false
}

CATCH_TEST_CASE("processes are placed on the machines, and an uncreatable folder is an error") {
  const std::string out = FreshDir("layout_machines");
  RunLayoutOptions options;
  options.machines = 2;
  absl::StatusOr<RunLayout> layout = MakeRunLayout(
      Config({"cluster.workers=2", "cluster.servers=2", "output_dir=" + out}), options);
  CATCH_REQUIRE(layout.ok());
  CATCH_CHECK(layout->processes[1].machine == 1);  // server_1, colocated
  CATCH_CHECK(layout->processes[3].machine == 1);  // worker_1

  std::ofstream(out + "/file") << "x";
  absl::StatusOr<RunLayout> bad =
      MakeRunLayout(Config({"output_dir=" + out + "/file/sub"}), RunLayoutOptions{});
  CATCH_REQUIRE(!bad.ok());
  CATCH_CHECK(bad.status().message().find("output_dir: cannot create") == 0);
}

}  // namespace
}  // namespace p3::tools::launcher
