#include "tools/launcher/summary.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
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

}  // namespace

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
  const Json& rank0 = input.worker_results.front();
  Json summary;
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
  }
  if (!input.hosts.empty()) summary["hosts"] = input.hosts;
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
      absl::StrFormat("%-10s %8s  %-26s %8s %10s %11s %10s %9s\n", "process", "pid", "status",
                      "seconds", "iterations", "samples/s", "final_loss", "test_acc");
  for (const TableRow& row : rows) {
    const Json* result = row.result;
    const std::string line =
        absl::StrFormat("%-10s %8s  %-26s %8.1f %10s %11s %10s %9s", row.name,
                        row.pid > 0 ? absl::StrCat(row.pid) : "-", row.status, row.seconds,
                        result != nullptr ? Cell(*result, "iterations") : "",
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
