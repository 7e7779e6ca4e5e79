#include "tools/launcher/summary.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "proto/config.h"

namespace p3::tools::launcher {
namespace {

using Json = nlohmann::ordered_json;

double Rounded(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

// A table cell: "-" unless `result[key]` is a number.
std::string Cell(const Json& result, const char* key) {
  auto it = result.find(key);
  if (it == result.end() || !it->is_number()) return "-";
  const double number = it->get<double>();
  if (number == std::floor(number) && std::fabs(number) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(number));
  }
  return absl::StrFormat("%.4g", number);
}

// "worker_1" -> "worker 1", for messages.
std::string Label(const std::string& name) { return absl::StrReplaceAll(name, {{"_", " "}}); }

std::string Seconds(double seconds) { return absl::StrFormat("%.3g s", seconds); }

std::string TimingText(const WorkerTiming& t) {
  return absl::StrFormat("worker %d, %s compute + %s waiting", t.rank, Seconds(t.compute_seconds),
                         t.wait_seconds.has_value() ? Seconds(*t.wait_seconds) : "? s");
}

Json TimingJson(const WorkerTiming& t) {
  return Json{
      {"rank", t.rank},
      {"iterations", t.iterations},
      {"iteration_seconds", Rounded(t.iteration_seconds, 6)},
      {"compute_seconds", Rounded(t.compute_seconds, 6)},
      {"wait_seconds", t.wait_seconds.has_value() ? Json(Rounded(*t.wait_seconds, 6)) : Json()}};
}

// What a process's part in a failed run was.
std::string Outcome(const ProcessOutcome& p, const FailureRanking& ranking, int index) {
  if (index == ranking.first) return "first failure";
  if (std::find(ranking.follow_on.begin(), ranking.follow_on.end(), index) !=
      ranking.follow_on.end()) {
    return "follow-on failure";
  }
  if (p.ended && p.stopped) {
    return ranking.first >= 0 ? "stopped after the first failure" : "stopped by the launcher";
  }
  if (!p.started) return "not started";
  if (!p.ended) return p.unended_status;
  return p.failed() ? "failed" : "ok";
}

// The workers a process's error says disconnected ("worker 1 disconnected ...", also
// inside a relayed Abort): their names ("worker_1").
std::vector<std::string> DisconnectedWorkers(absl::string_view error) {
  std::vector<std::string> names;
  static constexpr absl::string_view kWorker = "worker ";
  for (size_t at = error.find(kWorker); at != absl::string_view::npos;
       at = error.find(kWorker, at + 1)) {
    size_t end = at + kWorker.size();
    while (end < error.size() && absl::ascii_isdigit(error[end])) ++end;
    if (end == at + kWorker.size() || !absl::StartsWith(error.substr(end), " disconnected")) {
      continue;
    }
    names.push_back(absl::StrCat("worker_", error.substr(at + kWorker.size(),
                                                         end - at - kWorker.size())));
  }
  return names;
}

}  // namespace

std::string ProcessOutcome::status() const {
  if (!started) return "not started";
  if (!ended) return unended_status;
  if (signal != 0) {
    const char* name = strsignal(signal);
    return absl::StrCat("signal ", signal, name != nullptr ? absl::StrCat(" (", name, ")") : "");
  }
  return absl::StrCat("exit ", exit_status);
}

FailureRanking RankFailures(const std::vector<ProcessOutcome>& outcomes) {
  std::vector<int> failed;
  double earliest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const ProcessOutcome& p = outcomes[i];
    if (!p.failed()) continue;
    // Ended by the launcher's own SIGTERM / SIGKILL: stopped, not failed.
    if (p.stopped && (p.signal == SIGTERM || p.signal == SIGKILL)) continue;
    failed.push_back(static_cast<int>(i));
    earliest = std::min(earliest, p.end_unix);
  }
  // When each gave up: an error exit printed its message just before.
  auto gave_up = [&](int i) {
    const ProcessOutcome& p = outcomes[i];
    if (p.signal == 0 && p.last_output_unix > 0) return std::min(p.end_unix, p.last_output_unix);
    return p.end_unix;
  };
  auto killed_from_outside = [&](int i) {
    const int signal = outcomes[i].signal;
    return signal == SIGKILL || signal == SIGTERM || signal == SIGINT || signal == SIGHUP ||
           signal == SIGQUIT;
  };
  auto key = [&](int i) {
    const bool simultaneous = outcomes[i].end_unix <= earliest + kSimultaneousSeconds;
    return std::make_tuple(simultaneous ? 0 : 1, simultaneous && killed_from_outside(i) ? 0 : 1,
                           gave_up(i));
  };
  std::stable_sort(failed.begin(), failed.end(), [&](int a, int b) { return key(a) < key(b); });
  // A process whose error is that a worker disconnected follows that worker's own failure
  // when it came within kNamedPeerSeconds: the worker's exit closed the stream, but its
  // process may be reaped after the peer that saw the stream close. Placed in turn: the
  // first in the order above whose named workers are placed already (on a cycle, the first).
  auto follows = [&](int a, int b) {
    const ProcessOutcome& follower = outcomes[a];
    const ProcessOutcome& worker = outcomes[b];
    if (a == b || std::abs(worker.end_unix - follower.end_unix) > kNamedPeerSeconds) return false;
    const std::vector<std::string> named = DisconnectedWorkers(follower.last_log_line);
    return std::find(named.begin(), named.end(), worker.name) != named.end();
  };
  std::vector<int> ordered;
  while (ordered.size() < failed.size()) {
    auto unplaced = [&](int i) {
      return std::find(ordered.begin(), ordered.end(), i) == ordered.end();
    };
    int pick = -1;
    for (int a : failed) {
      if (!unplaced(a)) continue;
      if (pick < 0) pick = a;  // on a cycle
      if (std::none_of(failed.begin(), failed.end(),
                       [&](int b) { return unplaced(b) && follows(a, b); })) {
        pick = a;
        break;
      }
    }
    ordered.push_back(pick);
  }
  failed = ordered;
  FailureRanking ranking;
  if (failed.empty()) return ranking;
  ranking.first = failed.front();
  ranking.follow_on.assign(failed.begin() + 1, failed.end());
  return ranking;
}

std::vector<std::string> FailureReportLines(const std::vector<ProcessOutcome>& outcomes,
                                            const FailureRanking& ranking, double start_unix) {
  std::vector<std::string> lines;
  if (ranking.first < 0) return lines;
  const ProcessOutcome& first = outcomes[ranking.first];
  lines.push_back(absl::StrCat("first failure: ", Label(first.name),
                               first.node.empty() ? "" : " on " + first.node, " (", first.status(),
                               ") after ", Seconds(first.end_unix - start_unix),
                               ranking.follow_on.empty() ? "" : "; the errors below follow from it",
                               first.last_log_line.empty() ? "" : ": " + first.last_log_line));
  for (int i : ranking.follow_on) {
    const ProcessOutcome& p = outcomes[i];
    // Within the launcher's resolution (a cascade reaped together) no order is claimed.
    const double after = p.end_unix - first.end_unix;
    lines.push_back(absl::StrCat("  follow-on: ", Label(p.name), " (", p.status(), ") ",
                                 after >= 0.001 ? Seconds(after) + " later" : "at the same time",
                                 p.last_log_line.empty() ? "" : ": " + p.last_log_line));
  }
  std::vector<std::string> stopped;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const ProcessOutcome& p = outcomes[i];
    if (p.ended && p.stopped &&
        Outcome(p, ranking, static_cast<int>(i)) == "stopped after the first failure") {
      stopped.push_back(p.name);
    }
  }
  if (!stopped.empty()) {
    lines.push_back(
        absl::StrCat("  stopped after the first failure: ", absl::StrJoin(stopped, ", ")));
  }
  return lines;
}

absl::StatusOr<ProcessOutcome> ParseExitRecord(absl::string_view text) {
  Json record;
  try {
    record = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& error) {
    return absl::InvalidArgumentError(absl::StrCat("not a JSON object (", error.what(), ")"));
  }
  if (!record.is_object()) return absl::InvalidArgumentError("not a JSON object");
  ProcessOutcome outcome;
  for (const char* key : {"process", "exit_status", "signal", "start_unix", "end_unix"}) {
    if (!record.contains(key)) return absl::InvalidArgumentError(absl::StrCat("no \"", key, "\""));
  }
  try {
    outcome.name = record.at("process").get<std::string>();
    if (record.contains("node")) outcome.node = record.at("node").get<std::string>();
    outcome.exit_status = record.at("exit_status").get<int>();
    outcome.signal = record.at("signal").get<int>();
    outcome.start_unix = record.at("start_unix").get<double>();
    outcome.end_unix = record.at("end_unix").get<double>();
  } catch (const Json::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat("a member of the wrong type (", error.what(), ")"));
  }
  outcome.started = true;
  outcome.ended = true;
  return outcome;
}

absl::StatusOr<WorkerTiming> WorkerTimingFrom(const Json& result, absl::string_view records_csv) {
  WorkerTiming timing;
  if (result.contains("rank") && result.at("rank").is_number_integer()) {
    timing.rank = result.at("rank").get<int>();
  }
  std::vector<absl::string_view> lines = absl::StrSplit(records_csv, '\n', absl::SkipEmpty());
  if (lines.empty()) return absl::InvalidArgumentError("the records file is empty");
  const std::vector<absl::string_view> header = absl::StrSplit(lines[0], ',');
  const auto column = std::find(header.begin(), header.end(), "iteration_seconds");
  if (column == header.end()) {
    return absl::InvalidArgumentError("the records file has no iteration_seconds column");
  }
  const size_t at = static_cast<size_t>(column - header.begin());
  double total = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<absl::string_view> cells = absl::StrSplit(lines[i], ',');
    double seconds = 0;
    if (cells.size() <= at || !absl::SimpleAtod(cells[at], &seconds)) {
      return absl::InvalidArgumentError(
          absl::StrCat("records line ", i + 1, ": no number in column iteration_seconds"));
    }
    total += seconds;
  }
  timing.iterations = static_cast<int64_t>(lines.size()) - 1;
  if (timing.iterations == 0) return absl::InvalidArgumentError("the records file has no rows");
  const double n = static_cast<double>(timing.iterations);
  timing.iteration_seconds = total / n;
  timing.compute_seconds = timing.iteration_seconds;
  auto wait = result.find("forward_wait_seconds");
  if (wait != result.end() && wait->is_number()) {
    timing.wait_seconds = std::min(wait->get<double>() / n, timing.iteration_seconds);
    timing.compute_seconds = timing.iteration_seconds - *timing.wait_seconds;
  }
  return timing;
}

int Straggler(const std::vector<WorkerTiming>& timings) {
  if (timings.size() < 2) return -1;
  int slowest = 0;
  for (size_t i = 1; i < timings.size(); ++i) {
    if (timings[i].compute_seconds > timings[slowest].compute_seconds) {
      slowest = static_cast<int>(i);
    }
  }
  return slowest;
}

std::string StragglerLine(const std::vector<WorkerTiming>& timings) {
  const int slowest = Straggler(timings);
  if (slowest < 0) return "";
  // The last of the fastest: never the slowest itself (the first of the slowest), also
  // when every worker computes as long.
  int fastest = 0;
  for (size_t i = 1; i < timings.size(); ++i) {
    if (timings[i].compute_seconds <= timings[fastest].compute_seconds) {
      fastest = static_cast<int>(i);
    }
  }
  return absl::StrCat("slowest worker (per iteration): ", TimingText(timings[slowest]),
                      " (fastest: ", TimingText(timings[fastest]), ")");
}

const char* const kRequiredResultKeys[7] = {"rank",        "iterations",    "samples_per_second",
                                            "final_loss",  "test_accuracy", "param_l2",
                                            "wall_seconds"};

absl::StatusOr<Json> ParseWorkerResult(absl::string_view text) {
  Json result;
  try {
    result = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& error) {
    return absl::InvalidArgumentError(
        absl::StrCat("that is not a JSON object (", error.what(), ")"));
  }
  if (!result.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("that is not a JSON object (but a ", result.type_name(), ")"));
  }
  for (const char* key : kRequiredResultKeys) {
    if (!result.contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat("without \"", key, "\""));
    }
  }
  return result;
}

Json BuildSummary(const SummaryInput& input) {
  const config::ExperimentConfig& config = *input.config;
  // After a failure rank 0's result may be missing: its figures are then null.
  const Json no_result = Json::object();
  const Json& rank0 = input.worker_results.empty() ? no_result : input.worker_results.front();
  Json summary;
  summary["status"] = input.failed ? "failed" : "ok";
  summary["name"] = config.name();
  summary["mode"] = config.mode();
  summary["model"] = config.model().name();
  summary["workers"] = config.cluster().workers();
  summary["servers"] = config.cluster().servers();
  summary["worker_processes"] = config::WorkerProcessCount(config);
  summary["server_processes"] = config::ServerProcessCount(config);
  summary["batch_size_per_worker"] = config.training().batch_size();
  summary["global_batch_size"] = config::GlobalBatchSize(config);
  for (const char* key : {"iterations", "samples_per_second", "final_loss", "test_accuracy",
                          "param_l2", "wall_seconds"}) {
    summary[key] = rank0.contains(key) ? rank0.at(key) : Json();
  }
  // Where rank 0 wrote the trained model (output.save_model), when it did.
  if (rank0.contains("model_file")) summary["model_file"] = rank0.at("model_file");
  // Rank 0's epochs: its training loss and the test accuracy, per epoch.
  if (rank0.contains("epochs")) summary["epochs"] = rank0.at("epochs");
  // Elastic runs: rank 0's membership changes and the samples the cluster trained
  // (docs/reliability.md, "Elastic membership"); global_batch_size is iteration 0's.
  if (config.cluster().has_elastic() && rank0.contains("membership")) {
    summary["elastic"] = Json{{"max_workers", config::MaxWorkers(config)},
                              {"membership", rank0.at("membership")}};
    summary["samples_trained"] = rank0.value("samples_trained", Json());
  }
  summary["launcher_wall_seconds"] = Rounded(input.launcher_wall_seconds, 3);
  summary["config"] = input.config_path;
  summary["output_dir"] = input.output_dir;
  if (!input.trace_path.empty()) summary["trace"] = input.trace_path;
  if (input.network) {
    const config::NetworkConfig& network = config.network();
    Json links = Json::array();
    for (const LinkMeasurement& m : input.links_checked) {
      links.push_back(Json{{"from", m.from},
                           {"to", m.to},
                           {"gbps", Rounded(m.gbps, 4)},
                           {"bytes", m.bytes},
                           {"seconds", Rounded(m.seconds, 3)}});
    }
    summary["network"] = Json{{"bandwidth_gbps", network.bandwidth_gbps()},
                              {"machines", network.machines()},
                              {"placement", network.placement()},
                              {"subnet", network.subnet()},
                              {"links_checked", links}};
    if (!input.congestion_control.empty()) {
      summary["network"]["congestion_control"] = input.congestion_control;
    }
  }
  if (!input.hosts.empty()) summary["hosts"] = input.hosts;
  if (!input.tuning.is_null()) summary["tuning"] = input.tuning;
  if (!input.worker_command.empty()) {
    Json program{{"command", input.worker_command}, {"results_missing", input.results_missing}};
    if (!input.results_missing.empty()) {
      program["note"] =
          "these workers' programs wrote no result file (P3_RESULT_FILE); the run's figures "
          "come from rank 0's result, null when it wrote none";
    }
    summary["worker_program"] = program;
  }
  // What worker 0's online search timed and chose (scheduling.online_search).
  for (const nlohmann::ordered_json& result : input.worker_results) {
    if (result.value("rank", -1) == 0 && result.contains("online_search")) {
      summary["tuning"]["online_search"]["result"] = result["online_search"];
    }
  }
  const FailureRanking ranking = input.failed ? RankFailures(input.processes) : FailureRanking();
  if (!input.processes.empty()) {
    Json processes = Json::array();
    for (size_t i = 0; i < input.processes.size(); ++i) {
      const ProcessOutcome& p = input.processes[i];
      Json entry{{"name", p.name}, {"status", p.status()}};
      if (!p.node.empty()) entry["node"] = p.node;
      entry["seconds"] = p.ended ? Json(Rounded(p.end_unix - p.start_unix, 3)) : Json();
      entry["outcome"] = Outcome(p, ranking, static_cast<int>(i));
      processes.push_back(entry);
    }
    summary["processes"] = processes;
  }
  if (input.failed) {
    summary["error"] = std::string(input.error.substr(0, input.error.find('\n')));
    Json first;  // null when no process failed on its own (e.g. a missing result file)
    if (ranking.first >= 0) {
      const ProcessOutcome& p = input.processes[ranking.first];
      first = Json{{"process", p.name},
                   {"status", p.status()},
                   {"seconds_after_start", Rounded(p.end_unix - input.start_unix, 3)},
                   {"last_log_line", p.last_log_line}};
      if (!p.node.empty()) first["node"] = p.node;
    }
    summary["first_failure"] = first;
    Json follow_on = Json::array();
    for (int i : ranking.follow_on) {
      const ProcessOutcome& p = input.processes[i];
      follow_on.push_back(
          Json{{"process", p.name},
               {"status", p.status()},
               {"seconds_after_first",
                std::max(0.0, Rounded(p.end_unix - input.processes[ranking.first].end_unix, 3))},
               {"last_log_line", p.last_log_line}});
    }
    summary["follow_on_failures"] = follow_on;
  }
  if (!input.timings.empty()) {
    Json timing = Json::array();
    for (const WorkerTiming& t : input.timings) timing.push_back(TimingJson(t));
    summary["worker_timing"] = timing;
    const int slowest = Straggler(input.timings);
    if (slowest >= 0) summary["straggler"] = TimingJson(input.timings[slowest]);
  }
  summary["workers_results"] = input.worker_results;
  return summary;
}

std::string SummaryText(const Json& summary) {
  // Invalid UTF-8 (a name given on the command line) is replaced rather than thrown on.
  return summary.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string NumberText(const Json& value) {
  if (value.is_number()) {
    const double number = value.get<double>();
    if (number == std::floor(number) && std::fabs(number) < 1e15) {
      return absl::StrCat(static_cast<int64_t>(number));
    }
  }
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string FormatTable(const std::vector<TableRow>& rows) {
  std::string table =
      absl::StrFormat("%-10s %8s  %-30s %8s %10s %11s %10s %9s\n", "process", "pid", "status",
                      "seconds", "iterations", "samples/s", "final_loss", "test_acc");
  for (const TableRow& row : rows) {
    const Json* result = row.result;
    const std::string line =
        absl::StrFormat("%-10s %8s  %-30s %8.1f %10s %11s %10s %9s", row.name,
                        row.pid > 0 ? absl::StrCat(row.pid) : "-", row.status, row.seconds,
                        // An elastic run's worker: its own iterations.
                        result == nullptr                         ? ""
                        : result->contains("iterations_trained") ? Cell(*result, "iterations_trained")
                                                                  : Cell(*result, "iterations"),
                        result != nullptr ? Cell(*result, "samples_per_second") : "",
                        result != nullptr ? Cell(*result, "final_loss") : "",
                        result != nullptr ? Cell(*result, "test_accuracy") : "");
    absl::StrAppend(&table, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return table;
}

std::string ShortStatus(const std::string& description) {
  return absl::StrReplaceAll(description,
                             {{"exited with status", "exit"}, {"was killed by signal", "signal"}});
}

}  // namespace p3::tools::launcher
