#include <signal.h>

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
  CATCH_CHECK(keys == std::vector<std::string>{"status",
                                               "name",
                                               "mode",
                                               "model",
                                               "workers",
                                               "servers",
                                               "worker_processes",
                                               "server_processes",
                                               "batch_size_per_worker",
                                               "global_batch_size",
                                               "iterations",
                                               "samples_per_second",
                                               "final_loss",
                                               "test_accuracy",
                                               "param_l2",
                                               "wall_seconds",
                                               "launcher_wall_seconds",
                                               "config",
                                               "output_dir",
                                               "workers_results"});
  CATCH_CHECK(summary["status"] == "ok");
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

CATCH_TEST_CASE("trace, network, hosts and tuning members appear only when there is one") {
  const config::ExperimentConfig config =
      Config({"network.bandwidth_gbps=2.5", "network.machines=2"});
  SummaryInput input;
  input.config = &config;
  input.worker_results = {*ParseWorkerResult(kResult0)};
  const Json plain = BuildSummary(input);
  CATCH_CHECK(!plain.contains("trace"));
  CATCH_CHECK(!plain.contains("network"));
  CATCH_CHECK(!plain.contains("hosts"));
  CATCH_CHECK(!plain.contains("tuning"));

  input.trace_path = "/out/trace.json";
  input.network = true;
  LinkMeasurement link;
  link.from = 0;
  link.to = 1;
  link.bytes = 1000000;
  link.seconds = 1.23456;
  link.gbps = 2.345678;
  input.links_checked = {link};
  input.congestion_control = "cubic";
  input.hosts = {"alice@node1", "node2"};
  input.tuning = Json{{"slice_params", 80000}, {"searched", true}};
  const Json full = BuildSummary(input);
  CATCH_CHECK(full["trace"] == "/out/trace.json");
  CATCH_CHECK(full["network"]["bandwidth_gbps"] == 2.5);
  CATCH_CHECK(full["network"]["machines"] == 2);
  CATCH_CHECK(
      full["network"]["links_checked"][0] ==
      Json{{"from", 0}, {"to", 1}, {"gbps", 2.3457}, {"bytes", 1000000}, {"seconds", 1.235}});
  CATCH_CHECK(full["network"]["congestion_control"] == "cubic");
  CATCH_CHECK(full["hosts"] == Json{"alice@node1", "node2"});
  CATCH_CHECK(full["tuning"] == input.tuning);
}

CATCH_TEST_CASE("the per-epoch figures are rank 0's, and absent when it reported none") {
  const config::ExperimentConfig config = Config({});
  SummaryInput input;
  input.config = &config;
  input.worker_results = {*ParseWorkerResult(kResult0), Json{{"rank", 1}}};
  CATCH_CHECK(!BuildSummary(input).contains("epochs"));
  Json epochs = Json::array();
  epochs.push_back(
      {{"epoch", 1}, {"end_iteration", 937}, {"train_loss", 0.4}, {"test_accuracy", 0.89}});
  input.worker_results[0]["epochs"] = epochs;
  input.worker_results[1]["epochs"] = Json::array();  // another rank's: not used
  const Json summary = BuildSummary(input);
  CATCH_REQUIRE(summary.contains("epochs"));
  CATCH_CHECK(summary["epochs"].size() == 1);
  CATCH_CHECK(summary["epochs"][0]["test_accuracy"] == 0.89);
}

CATCH_TEST_CASE("an elastic run records rank 0's membership changes and samples trained") {
  const config::ExperimentConfig fixed = Config({});
  SummaryInput input;
  input.config = &fixed;
  Json rank0 = *ParseWorkerResult(kResult0);
  rank0["membership"] = Json::parse(
      R"([{"from_iteration":0,"present":[0,1]},{"from_iteration":100,"present":[0,1,2]}])");
  rank0["samples_trained"] = 4000;
  input.worker_results = {rank0};
  CATCH_CHECK(!BuildSummary(input).contains("elastic"));  // not an elastic run
  const config::ExperimentConfig elastic =
      Config({"cluster.workers=2", "cluster.elastic.max_workers=3"});
  input.config = &elastic;
  const Json summary = BuildSummary(input);
  CATCH_REQUIRE(summary.contains("elastic"));
  CATCH_CHECK(summary["elastic"]["max_workers"] == 3);
  CATCH_CHECK(summary["elastic"]["membership"] == rank0["membership"]);
  CATCH_CHECK(summary["samples_trained"] == 4000);
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

CATCH_TEST_CASE("a worker program: worker_program says which results are missing") {
  const config::ExperimentConfig config = Config({"worker.command=python3 train.py"});
  SummaryInput input;
  input.config = &config;
  CATCH_CHECK(!BuildSummary(input).contains("worker_program"));  // p3_worker
  input.worker_command = config.worker().command();
  input.results_missing = {"worker_0", "worker_1"};
  Json summary = BuildSummary(input);  // a run that is ok without any result
  CATCH_CHECK(summary["status"] == "ok");
  CATCH_CHECK(summary["iterations"].is_null());
  CATCH_CHECK(summary["param_l2"].is_null());
  CATCH_CHECK(summary["worker_program"]["command"] == "python3 train.py");
  CATCH_CHECK(summary["worker_program"]["results_missing"] == Json{"worker_0", "worker_1"});
  CATCH_CHECK(summary["worker_program"].contains("note"));
  input.results_missing = {};
  input.worker_results = {*ParseWorkerResult(kResult0)};
  summary = BuildSummary(input);
  CATCH_CHECK(summary["iterations"] == 12);
  CATCH_CHECK(summary["worker_program"]["results_missing"] == Json::array());
  CATCH_CHECK(!summary["worker_program"].contains("note"));
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
              "process         pid  status                          seconds iterations   "
              "samples/s final_loss  test_acc\n"
              "server_0       4242  exit 0                              3.2\n"
              "worker_0       4243  signal 15 (Terminated)              2.0         12        "
              "6400     0.3121    0.8514\n"
              "worker_1          -  not started                         0.0          7           "
              "-          -         -\n");
}

CATCH_TEST_CASE("the table shows the iterations an elastic run's worker trained, not the run's") {
  // Rank 2 joined at iteration 100 and left at 160 of a 1500-iteration run.
  const Json joined = Json{{"iterations", 1500}, {"iterations_trained", 60}};
  std::vector<TableRow> rows(1);
  rows[0].name = "worker_2";
  rows[0].status = "exit 0";
  rows[0].result = &joined;
  const std::string table = FormatTable(rows);
  CATCH_CHECK(absl::StrContains(table, "worker_2          -  exit 0                              "
                                       "0.0         60"));
  CATCH_CHECK(!absl::StrContains(table, "1500"));
}

// A process that ended at `end` (seconds after 1000) with `exit_status` or `signal`.
ProcessOutcome Ended(const std::string& name, double end, int exit_status, int signal,
                     bool stopped = false, const std::string& last_line = "") {
  ProcessOutcome p;
  p.name = name;
  p.started = true;
  p.ended = true;
  p.start_unix = 1000;
  p.end_unix = 1000 + end;
  p.exit_status = exit_status;
  p.signal = signal;
  p.stopped = stopped;
  p.last_log_line = last_line;
  return p;
}

CATCH_TEST_CASE("a process's status: exit, signal, not started, or still running") {
  CATCH_CHECK(Ended("server_0", 1, 0, 0).status() == "exit 0");
  CATCH_CHECK(Ended("server_0", 1, 3, 0).status() == "exit 3");
  CATCH_CHECK(Ended("server_0", 1, 0, 9).status() == "signal 9 (Killed)");
  CATCH_CHECK(!Ended("server_0", 1, 0, 0).failed());
  CATCH_CHECK(Ended("server_0", 1, 0, 15).failed());
  ProcessOutcome p;
  CATCH_CHECK(p.status() == "not started");
  p.started = true;
  CATCH_CHECK(p.status() == "running");
  p.unended_status = "no exit record";
  CATCH_CHECK(p.status() == "no exit record");
  CATCH_CHECK(!p.failed());
}

CATCH_TEST_CASE("the first failure is the one that ended first; the others follow from it") {
  // Server 1 is killed; worker 1 and server 0 then fail on their own, naming what they
  // saw; the launcher stops worker 0. Listed servers first, as the launcher does.
  const std::vector<ProcessOutcome> outcomes = {
      Ended("server_0", 3.050, 1, 0, false, "server 0 aborted the run: worker 1 disconnected"),
      Ended("server_1", 3.000, 0, 9),
      Ended("worker_0", 3.100, 0, 15, /*stopped=*/true),
      Ended("worker_1", 3.020, 1, 0, false, "p3_worker 1: UNAVAILABLE: lost server 1"),
  };
  const FailureRanking ranking = RankFailures(outcomes);
  CATCH_CHECK(ranking.first == 1);
  CATCH_CHECK(ranking.follow_on == std::vector<int>{3, 0});

  CATCH_CHECK(FailureReportLines(outcomes, ranking, 1000.0) ==
              std::vector<std::string>{
                  "first failure: server 1 (signal 9 (Killed)) after 3 s; the errors below "
                  "follow from it",
                  "  follow-on: worker 1 (exit 1) 0.02 s later: p3_worker 1: UNAVAILABLE: lost "
                  "server 1",
                  "  follow-on: server 0 (exit 1) 0.05 s later: server 0 aborted the run: worker 1 "
                  "disconnected",
                  "  stopped after the first failure: worker_0"});

  const config::ExperimentConfig config = Config({});
  SummaryInput input;
  input.config = &config;
  input.processes = outcomes;
  input.start_unix = 1000;
  input.failed = true;
  const Json summary = BuildSummary(input);  // No worker wrote a result.
  CATCH_CHECK(summary["status"] == "failed");
  CATCH_CHECK(summary["iterations"].is_null());
  CATCH_CHECK(summary["first_failure"] == Json{{"process", "server_1"},
                                               {"status", "signal 9 (Killed)"},
                                               {"seconds_after_start", 3.0},
                                               {"last_log_line", ""}});
  CATCH_REQUIRE(summary["follow_on_failures"].size() == 2);
  CATCH_CHECK(summary["follow_on_failures"][0]["process"] == "worker_1");
  CATCH_CHECK(summary["follow_on_failures"][0]["seconds_after_first"] == 0.02);
  CATCH_CHECK(summary["follow_on_failures"][1]["last_log_line"] ==
              "server 0 aborted the run: worker 1 disconnected");
  std::vector<std::string> roles;
  for (const Json& p : summary["processes"]) roles.push_back(p["outcome"]);
  CATCH_CHECK(roles == std::vector<std::string>{"follow-on failure", "first failure",
                                                "stopped after the first failure",
                                                "follow-on failure"});
  CATCH_CHECK(summary["processes"][1]["seconds"] == 3.0);
}

CATCH_TEST_CASE("at the same instant a killed process goes first, then the given order") {
  // Reaped together: the one killed by a signal died first; its peers exit with errors.
  const std::vector<ProcessOutcome> same_time = {
      Ended("server_0", 2, 1, 0), Ended("server_1", 2, 0, 9), Ended("worker_0", 2, 1, 0)};
  FailureRanking ranking = RankFailures(same_time);
  CATCH_CHECK(ranking.first == 1);
  CATCH_CHECK(ranking.follow_on == std::vector<int>{0, 2});

  const std::vector<ProcessOutcome> exits = {Ended("worker_0", 2, 1, 0),
                                             Ended("worker_1", 2, 4, 0)};
  CATCH_CHECK(RankFailures(exits).first == 0);

  // Time decides before the kind of end.
  const std::vector<ProcessOutcome> later_signal = {Ended("server_0", 2.5, 0, 11),
                                                    Ended("worker_1", 2.4, 1, 0)};
  CATCH_CHECK(RankFailures(later_signal).first == 1);
}

CATCH_TEST_CASE("a cascade reaped together: the killed server first, then by when each gave up") {
  // Seen in a run: server 1 was killed; worker 1 lost it and exited 1, then server 0 lost
  // worker 1 and exited 1, all within a millisecond, before the launcher woke. Reaped in
  // pid order, server 0 "ended" first.
  std::vector<ProcessOutcome> outcomes = {
      Ended("server_0", 3.000000, 1, 0, false, "server 0 aborted the run: worker 1 disconnected"),
      Ended("server_1", 3.000005, 0, 9), Ended("worker_0", 3.001, 0, 15, /*stopped=*/true),
      Ended("worker_1", 3.000986, 1, 0, false, "worker 1: lost server 1")};
  outcomes[0].last_output_unix = 1002.9996;  // Printed its error after worker 1's.
  outcomes[3].last_output_unix = 1002.9994;
  outcomes[1].last_output_unix = 1001.0;  // Its last line long before: it said nothing.
  FailureRanking ranking = RankFailures(outcomes);
  CATCH_CHECK(ranking.first == 1);
  CATCH_CHECK(ranking.follow_on == std::vector<int>{3, 0});
  const std::vector<std::string> lines = FailureReportLines(outcomes, ranking, 1000);
  CATCH_REQUIRE(lines.size() == 4);
  CATCH_CHECK(lines[1] ==
              "  follow-on: worker 1 (exit 1) at the same time: worker 1: lost server 1");

  // A crash (SIGSEGV) may be a consequence too: no precedence for it, only its time.
  outcomes[1].signal = SIGSEGV;
  ranking = RankFailures(outcomes);
  CATCH_CHECK(ranking.first == 3);  // Worker 1 gave up first (its last output).
  CATCH_CHECK(ranking.follow_on == std::vector<int>{0, 1});

  // A process killed well after the first failure (beyond kSimultaneousSeconds) follows it.
  const std::vector<ProcessOutcome> later = {
      Ended("worker_0", 2.0, 1, 0), Ended("server_0", 2.0 + 2 * kSimultaneousSeconds, 0, 9)};
  CATCH_CHECK(RankFailures(later).first == 0);
}

CATCH_TEST_CASE("a server's 'worker R disconnected' follows worker R's own failure") {
  // Seen in a partition trial (link_faults.md): worker 0's wait timed out, naming the cut
  // server; both servers saw its stream close and exited 0.12 s before it was reaped.
  std::vector<ProcessOutcome> outcomes = {
      Ended("server_0", 20.00, 1, 0, false,
            "p3_server 0: UNAVAILABLE: worker 0: worker 0 disconnected before it was done"),
      Ended("server_1", 20.01, 1, 0, false,
            "p3_server 1: UNAVAILABLE: worker 0: worker 0 disconnected before it was done"),
      Ended("worker_0", 20.12, 1, 0, false,
            "p3_worker 0: DEADLINE_EXCEEDED: worker 0: waited 5s for parameters: ...; "
            "missing: server 1's values of 1 slice (5)"),
      Ended("worker_1", 20.15, 1, 0, false,
            "p3_worker 1: ABORTED: server 0 aborted the run: worker 0: worker 0 disconnected "
            "before it was done")};
  FailureRanking ranking = RankFailures(outcomes);
  CATCH_CHECK(ranking.first == 2);
  CATCH_CHECK(ranking.follow_on == std::vector<int>{0, 1, 3});
  const std::vector<std::string> lines = FailureReportLines(outcomes, ranking, 1000);
  CATCH_REQUIRE(!lines.empty());
  CATCH_CHECK(absl::StrContains(lines[0], "first failure: worker 0 (exit 1)"));

  // Beyond kNamedPeerSeconds the worker's failure is not the cause: time decides.
  outcomes[2].end_unix = outcomes[0].end_unix + kNamedPeerSeconds + 0.5;
  outcomes[3].end_unix = outcomes[2].end_unix + 0.01;
  CATCH_CHECK(RankFailures(outcomes).first == 0);

  // A worker stopped by the launcher did not fail on its own: the server stays first.
  outcomes[2] = Ended("worker_0", 20.12, 0, 15, /*stopped=*/true);
  CATCH_CHECK(RankFailures(outcomes).first == 0);

  // "worker 10 disconnected" names worker 10, not worker 1.
  const std::vector<ProcessOutcome> ten = {
      Ended("server_0", 5.0, 1, 0, false, "worker 10 disconnected before it was done"),
      Ended("worker_1", 5.1, 1, 0, false, "worker 1: lost server 1")};
  CATCH_CHECK(RankFailures(ten).first == 0);

  // Two errors naming each other cannot loop: the order by time stands.
  const std::vector<ProcessOutcome> loop = {
      Ended("worker_0", 5.0, 1, 0, false, "worker 1 disconnected"),
      Ended("worker_1", 5.1, 1, 0, false, "worker 0 disconnected")};
  CATCH_CHECK(RankFailures(loop).first == 0);
  CATCH_CHECK(RankFailures(loop).follow_on == std::vector<int>{1});
}

CATCH_TEST_CASE("processes the launcher stopped are not failures, unless they failed another way") {
  const std::vector<ProcessOutcome> outcomes = {
      Ended("server_0", 5, 0, 15, /*stopped=*/true), Ended("server_1", 5, 0, 9, /*stopped=*/true),
      Ended("worker_0", 4, 2, 0), Ended("worker_1", 5, 1, 0, /*stopped=*/true)};
  const FailureRanking ranking = RankFailures(outcomes);
  CATCH_CHECK(ranking.first == 2);
  CATCH_CHECK(ranking.follow_on == std::vector<int>{3});  // Exited 1 while being stopped.

  const std::vector<ProcessOutcome> fine = {Ended("server_0", 1, 0, 0), Ended("worker_0", 1, 0, 0)};
  CATCH_CHECK(RankFailures(fine).first == -1);
  CATCH_CHECK(FailureReportLines(fine, RankFailures(fine), 1000).empty());
}

CATCH_TEST_CASE("a Slurm task's exit record reads as an ended process") {
  absl::StatusOr<ProcessOutcome> record = ParseExitRecord(
      R"({"process": "worker_1", "node": "n2", "host": "vm", "exit_status": 0, "signal": 9,
          "start_unix": 1764575000.25, "end_unix": 1764575003.5})");
  CATCH_REQUIRE(record.ok());
  CATCH_CHECK(record->name == "worker_1");
  CATCH_CHECK(record->node == "n2");
  CATCH_CHECK(record->ended);
  CATCH_CHECK(record->status() == "signal 9 (Killed)");
  CATCH_CHECK(record->end_unix - record->start_unix == 3.25);

  CATCH_CHECK(absl::StartsWith(ParseExitRecord("{").status().message(), "not a JSON object ("));
  CATCH_CHECK(ParseExitRecord(R"({"process": "worker_1"})").status().message() ==
              "no \"exit_status\"");
  CATCH_CHECK(absl::StartsWith(
      ParseExitRecord(R"({"process": 1, "exit_status": 0, "signal": 0, "start_unix": 1,
                          "end_unix": 2})")
          .status()
          .message(),
      "a member of the wrong type"));
}

CATCH_TEST_CASE("timing per iteration: compute is what is left after waiting for parameters") {
  const std::string records =
      "iteration,loss,iteration_seconds,samples_per_second\n"
      "0,2.3,0.050,1280\n"
      "1,2.2,0.030,2133\n"
      "2,2.1,0.040,1600\n"
      "3,2.0,0.040,1600\n";
  Json result = {{"rank", 1}, {"forward_wait_seconds", 0.1}};
  absl::StatusOr<WorkerTiming> timing = WorkerTimingFrom(result, records);
  CATCH_REQUIRE(timing.ok());
  CATCH_CHECK(timing->rank == 1);
  CATCH_CHECK(timing->iterations == 4);
  CATCH_CHECK(timing->iteration_seconds == Approx(0.04));
  CATCH_REQUIRE(timing->wait_seconds.has_value());
  CATCH_CHECK(*timing->wait_seconds == Approx(0.025));
  CATCH_CHECK(timing->compute_seconds == Approx(0.015));

  // Without forward_wait_seconds (an older worker): the whole iteration is compute.
  timing = WorkerTimingFrom(Json{{"rank", 0}}, records);
  CATCH_REQUIRE(timing.ok());
  CATCH_CHECK(!timing->wait_seconds.has_value());
  CATCH_CHECK(timing->compute_seconds == Approx(0.04));

  CATCH_CHECK(WorkerTimingFrom(result, "iteration,loss\n0,1\n").status().message() ==
              "the records file has no iteration_seconds column");
  CATCH_CHECK(WorkerTimingFrom(result, "iteration,iteration_seconds\n").status().message() ==
              "the records file has no rows");
  CATCH_CHECK(WorkerTimingFrom(result, "iteration,iteration_seconds\n0,x\n").status().message() ==
              "records line 2: no number in column iteration_seconds");
}

CATCH_TEST_CASE("the straggler is the worker with the most compute per iteration") {
  WorkerTiming fast;
  fast.rank = 0;
  fast.iterations = 10;
  fast.iteration_seconds = 0.03;
  fast.wait_seconds = 0.02;
  fast.compute_seconds = 0.01;
  WorkerTiming slow = fast;
  slow.rank = 1;
  slow.wait_seconds = 0.0;
  slow.compute_seconds = 0.03;
  CATCH_CHECK(Straggler({}) == -1);
  CATCH_CHECK(Straggler({fast}) == -1);
  CATCH_CHECK(Straggler({fast, slow}) == 1);
  CATCH_CHECK(Straggler({slow, fast}) == 0);
  CATCH_CHECK(StragglerLine({fast}) == "");
  WorkerTiming same = fast;
  same.rank = 1;
  CATCH_CHECK(StragglerLine({fast, same}) ==
              "slowest worker (per iteration): worker 0, 0.01 s compute + 0.02 s waiting (fastest: "
              "worker 1, 0.01 s compute + 0.02 s waiting)");
  CATCH_CHECK(StragglerLine({fast, slow}) ==
              "slowest worker (per iteration): worker 1, 0.03 s compute + 0 s waiting (fastest: "
              "worker 0, 0.01 s compute + 0.02 s waiting)");

  const config::ExperimentConfig config = Config({});
  SummaryInput input;
  input.config = &config;
  input.worker_results = {*ParseWorkerResult(kResult0)};
  input.timings = {fast, slow};
  const Json summary = BuildSummary(input);
  CATCH_CHECK(summary["straggler"] == Json{{"rank", 1},
                                           {"iterations", 10},
                                           {"iteration_seconds", 0.03},
                                           {"compute_seconds", 0.03},
                                           {"wait_seconds", 0.0}});
  CATCH_CHECK(summary["worker_timing"].size() == 2);
  input.timings = {fast};
  CATCH_CHECK(!BuildSummary(input).contains("straggler"));
}

CATCH_TEST_CASE("numbers for people: integers without a fraction") {
  CATCH_CHECK(NumberText(Json(12)) == "12");
  CATCH_CHECK(NumberText(Json(12.0)) == "12");
  CATCH_CHECK(NumberText(Json(0.3121)) == "0.3121");
  CATCH_CHECK(NumberText(Json("x")) == "\"x\"");
}

}  // namespace
}  // namespace p3::tools::launcher
