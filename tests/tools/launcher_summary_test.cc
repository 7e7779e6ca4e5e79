#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "proto/config.h"
#include "tools/launcher/summary.h"

namespace p3::tools::launcher {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kResult0[] =
    R"({"rank": 0, "iterations": 12, "samples_per_second": 6400.25, "final_loss": 0.3121,
        "test_accuracy": 0.8514, "param_l2": 41.7, "wall_seconds": 3.25, "extra": "kept"})";

config::ExperimentConfig Config(const std::vector<std::string>& overrides) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig("", overrides);
  CATCH_INFO(config.status().message());
  CATCH_REQUIRE(config.ok());
  return *config;
}

CATCH_TEST_CASE("a worker result must be a JSON object with every required member") {
  absl::StatusOr<Json> good = ParseWorkerResult(kResult0);
  CATCH_REQUIRE(good.ok());
  CATCH_CHECK((*good)["iterations"] == 12);
  CATCH_CHECK((*good)["extra"] == "kept");

  absl::StatusOr<Json> missing = ParseWorkerResult(R"({"rank": 0, "iterations": 3})");
  CATCH_REQUIRE(!missing.ok());
  CATCH_CHECK(missing.status().message() == "without \"samples_per_second\"");

  for (const char* bad : {"{\"rank\": ", "[1, 2]", "", "12"}) {
    CATCH_CAPTURE(bad);
    absl::StatusOr<Json> parsed = ParseWorkerResult(bad);
    CATCH_REQUIRE(!parsed.ok());
    CATCH_CHECK(absl::StartsWith(parsed.status().message(), "that is not a JSON object ("));
  }
}

CATCH_TEST_CASE("summary.json has the documented members in order, rank 0's numbers") {
  config::ExperimentConfig config =
      Config({"cluster.workers=2", "cluster.servers=3", "training.batch_size=16"});
  config.set_name("run \"1\"");
  SummaryInput input;
  input.config = &config;
  input.config_path = "/out/config.textproto";
  input.output_dir = "/out";
  input.launcher_wall_seconds = 4.12345;
  input.worker_results = {*ParseWorkerResult(kResult0), Json{{"rank", 1}}};
  const Json summary = BuildSummary(input);

  std::vector<std::string> keys;
  for (const auto& item : summary.items()) keys.push_back(item.key());
  CATCH_CHECK(keys == std::vector<std::string>{
                          "name", "mode", "model", "workers", "servers", "worker_processes",
                          "server_processes", "batch_size_per_worker", "global_batch_size",
                          "iterations", "samples_per_second", "final_loss", "test_accuracy",
                          "param_l2", "wall_seconds", "launcher_wall_seconds", "config",
                          "output_dir", "workers_results"});
  CATCH_CHECK(summary["name"] == "run \"1\"");
  CATCH_CHECK(summary["servers"] == 3);
  CATCH_CHECK(summary["global_batch_size"] == 32);
  CATCH_CHECK(summary["iterations"] == 12);
  CATCH_CHECK(summary["samples_per_second"] == 6400.25);
  CATCH_CHECK(summary["launcher_wall_seconds"] == 4.123);
  CATCH_CHECK(summary["workers_results"][0]["extra"] == "kept");
  CATCH_CHECK(summary["workers_results"][1]["rank"] == 1);

  // Written as text, it reads back the same (quotes in the name escaped).
  const std::string text = SummaryText(summary);
  CATCH_CHECK(absl::EndsWith(text, "}\n"));
  CATCH_CHECK(absl::StrContains(text, R"("name": "run \"1\"")"));
  CATCH_CHECK(Json::parse(text) == summary);
}

CATCH_TEST_CASE("trace, network and hosts members appear only when there is one") {
  const config::ExperimentConfig config =
      Config({"network.bandwidth_gbps=2.5", "network.machines=2"});
  SummaryInput input;
  input.config = &config;
  input.worker_results = {*ParseWorkerResult(kResult0)};
  const Json plain = BuildSummary(input);
  CATCH_CHECK(!plain.contains("trace"));
  CATCH_CHECK(!plain.contains("network"));
  CATCH_CHECK(!plain.contains("hosts"));

  input.trace_path = "/out/trace.json";
  input.network = true;
  LinkMeasurement link;
  link.from = 0;
  link.to = 1;
  link.bytes = 1000000;
  link.seconds = 1.23456;
  link.gbps = 2.345678;
  input.links_checked = {link};
  input.hosts = {"alice@node1", "node2"};
  const Json full = BuildSummary(input);
  CATCH_CHECK(full["trace"] == "/out/trace.json");
  CATCH_CHECK(full["network"]["bandwidth_gbps"] == 2.5);
  CATCH_CHECK(full["network"]["machines"] == 2);
  CATCH_CHECK(
      full["network"]["links_checked"][0] ==
      Json{{"from", 0}, {"to", 1}, {"gbps", 2.3457}, {"bytes", 1000000}, {"seconds", 1.235}});
  CATCH_CHECK(full["hosts"] == Json{"alice@node1", "node2"});
}

CATCH_TEST_CASE("the per-epoch figures are rank 0's, and absent when it reported none") {
  const config::ExperimentConfig config = Config({});
  SummaryInput input;
  input.config = &config;
  input.worker_results = {*ParseWorkerResult(kResult0), Json{{"rank", 1}}};
  CATCH_CHECK(!BuildSummary(input).contains("epochs"));
  Json epochs = Json::array();
  epochs.push_back({{"epoch", 1}, {"end_iteration", 937}, {"train_loss", 0.4},
                    {"test_accuracy", 0.89}});
  input.worker_results[0]["epochs"] = epochs;
  input.worker_results[1]["epochs"] = Json::array();  // another rank's: not used
  const Json summary = BuildSummary(input);
  CATCH_REQUIRE(summary.contains("epochs"));
  CATCH_CHECK(summary["epochs"].size() == 1);
  CATCH_CHECK(summary["epochs"][0]["test_accuracy"] == 0.89);
}

CATCH_TEST_CASE("model_file is rank 0's, and absent when rank 0 wrote none") {
  const config::ExperimentConfig config = Config({});
  SummaryInput input;
  input.config = &config;
  input.worker_results = {*ParseWorkerResult(kResult0)};
  CATCH_CHECK(!BuildSummary(input).contains("model_file"));
  Json rank0 = *ParseWorkerResult(kResult0);
  rank0["model_file"] = "/out/model.pt";
  input.worker_results = {rank0};
  CATCH_CHECK(BuildSummary(input)["model_file"] == "/out/model.pt");
}

CATCH_TEST_CASE("the table shows each process, and '-' for a missing or non-numeric result") {
  const Json result = *ParseWorkerResult(kResult0);
  const Json partial = Json{{"iterations", 7}, {"final_loss", "nan?"}};
  std::vector<TableRow> rows(3);
  rows[0].name = "server_0";
  rows[0].pid = 4242;
  rows[0].status = ShortStatus("exited with status 0");
  rows[0].seconds = 3.25;
  rows[1].name = "worker_0";
  rows[1].pid = 4243;
  rows[1].status = ShortStatus("was killed by signal 15 (Terminated)");
  rows[1].seconds = 2;
  rows[1].result = &result;
  rows[2].name = "worker_1";
  rows[2].status = "not started";
  rows[2].result = &partial;
  const std::string table = FormatTable(rows);
  CATCH_CHECK(table ==
              "process         pid  status                      seconds iterations   samples/s "
              "final_loss  test_acc\n"
              "server_0       4242  exit 0                          3.2\n"
              "worker_0       4243  signal 15 (Terminated)          2.0         12        6400 "
              "    0.3121    0.8514\n"
              "worker_1          -  not started                     0.0          7           - "
              "         -         -\n");
}

CATCH_TEST_CASE("numbers for people: integers without a fraction") {
  CATCH_CHECK(NumberText(Json(12)) == "12");
  CATCH_CHECK(NumberText(Json(12.0)) == "12");
  CATCH_CHECK(NumberText(Json(0.3121)) == "0.3121");
  CATCH_CHECK(NumberText(Json("x")) == "\"x\"");
}

}  // namespace
}  // namespace p3::tools::launcher
