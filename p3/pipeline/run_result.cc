#include "p3/pipeline/run_result.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace p3::pipeline {
namespace {

std::string OptionalNumber(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.4f", *v) : "null";
}

nlohmann::ordered_json OptionalJson(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json EpochJson(const EpochRecord& e) {
  nlohmann::ordered_json j;
  j["epoch"] = e.epoch;
  j["iterations"] = e.iterations;
  j["train_loss"] = e.train_loss;  // NaN and infinity are written as null
  j["seconds"] = e.seconds;
  j["samples_per_second"] = e.samples_per_second;
  j["test_accuracy"] = OptionalJson(e.test_accuracy);
  j["bubble_fraction"] = e.bubble_fraction;
  return j;
}

nlohmann::ordered_json BytesJson(const std::vector<std::pair<std::string, int64_t>>& bytes) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [name, value] : bytes) j[name] = value;
  return j;
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

std::string FormatMemoryLine(const StageMemoryRecord& record) {
  std::string line =
      absl::StrFormat("MEMORY stage=%d peak_mib=%.3f params_mib=%.3f", record.stage,
                      record.peak_bytes / kMiB, record.parameter_bytes / kMiB);
  for (const auto& [name, value] : record.at_peak) {
    absl::StrAppendFormat(&line, " %s=%.3f", name, value / kMiB);
  }
  return line;
}

std::string RunResult::ToJson() const {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["weights"] = weights;
  j["spectrain_version"] = spectrain_version;
  j["stages"] = stages;
  j["schedule"] = schedule;
  j["microbatches"] = microbatches;
  j["recompute"] = recompute;
  j["chunks"] = chunks;
  j["train_samples"] = train_samples;
  j["devices"] = devices;
  j["boundaries"] = boundaries;
  j["stage_blocks"] = stage_blocks;
  j["block_names"] = block_names;
  j["block_seconds"] = block_seconds;
  j["batch_size"] = batch_size;
  j["iterations"] = iterations;
  j["samples_per_second"] = samples_per_second;
  j["bubble_fraction"] = bubble_fraction;
  j["final_loss"] = final_loss;  // NaN and infinity are written as null
  j["test_accuracy"] = OptionalJson(test_accuracy);
  j["wall_seconds"] = wall_seconds;
  j["stage_times"] = nlohmann::ordered_json::array();
  for (const StageTimes& t : stage_times) {
    nlohmann::ordered_json st;
    st["forward_s"] = t.forward_seconds;
    st["backward_s"] = t.backward_seconds;
    st["update_s"] = t.update_seconds;
    st["weights_s"] = t.weights_seconds;
    st["wait_s"] = t.wait_seconds;
    st["cpu_s"] = t.cpu_seconds;
    j["stage_times"].push_back(st);
  }
  j["trace_file"] = trace_file;
  j["epochs"] = nlohmann::ordered_json::array();
  for (const EpochRecord& e : epochs) j["epochs"].push_back(EpochJson(e));
  j["memory"] = nlohmann::ordered_json::array();
  for (const StageMemoryRecord& m : memory) {
    nlohmann::ordered_json stage;
    stage["stage"] = m.stage;
    stage["parameter_bytes"] = m.parameter_bytes;
    stage["peak_bytes"] = m.peak_bytes;
    stage["at_peak"] = BytesJson(m.at_peak);
    stage["category_peak"] = BytesJson(m.category_peak);
    j["memory"].push_back(stage);
  }
  return j.dump();
}

std::string RunResult::EpochsCsv() const {
  std::string csv = "epoch,iterations,train_loss,seconds,samples_per_second,test_accuracy\n";
  for (const EpochRecord& e : epochs) {
    absl::StrAppendFormat(&csv, "%d,%d,%.6f,%.3f,%.3f,%s\n", e.epoch, e.iterations, e.train_loss,
                          e.seconds, e.samples_per_second,
                          e.test_accuracy ? absl::StrFormat("%.4f", *e.test_accuracy) : "");
  }
  return csv;
}

std::string FormatEpochLine(const EpochRecord& record) {
  return absl::StrFormat(
      "EPOCH epoch=%d train_loss=%.4f seconds=%.2f samples_per_second=%.1f test_accuracy=%s",
      record.epoch, record.train_loss, record.seconds, record.samples_per_second,
      OptionalNumber(record.test_accuracy));
}

}  // namespace p3::pipeline
