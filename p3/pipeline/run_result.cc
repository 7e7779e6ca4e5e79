#include "p3/pipeline/run_result.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace p3::pipeline {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string OptionalNumber(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.4f", *v) : "null";
}

// JSON has no NaN or infinity: a diverged run's loss is written as null.
std::string Number(double v) { return std::isfinite(v) ? absl::StrFormat("%.6f", v) : "null"; }

std::string QuotedList(const std::vector<std::string>& values) {
  std::vector<std::string> quoted;
  for (const std::string& v : values) quoted.push_back(JsonString(v));
  return absl::StrJoin(quoted, ", ");
}

std::string EpochJson(const EpochRecord& e) {
  return absl::StrFormat(
      "{\"epoch\": %d, \"iterations\": %d, \"train_loss\": %s, \"seconds\": %.3f, "
      "\"samples_per_second\": %.3f, \"test_accuracy\": %s}",
      e.epoch, e.iterations, Number(e.train_loss), e.seconds, e.samples_per_second,
      OptionalNumber(e.test_accuracy));
}

}  // namespace

std::string RunResult::ToJson() const {
  std::vector<std::string> epoch_json;
  for (const EpochRecord& e : epochs) epoch_json.push_back(EpochJson(e));
  std::vector<std::string> seconds;
  for (double s : block_seconds) seconds.push_back(absl::StrFormat("%.6f", s));
  return absl::StrFormat(
      "{\"name\": %s, \"weights\": %s, \"spectrain_version\": %d, \"stages\": %d, "
      "\"devices\": [%s], \"boundaries\": [%s], \"stage_blocks\": [%s], \"block_names\": [%s], "
      "\"block_seconds\": [%s], \"batch_size\": %d, \"iterations\": %d, "
      "\"samples_per_second\": %.3f, \"final_loss\": %s, \"test_accuracy\": %s, "
      "\"wall_seconds\": %.3f, \"epochs\": [%s]}",
      JsonString(name), JsonString(weights), spectrain_version, stages, QuotedList(devices),
      absl::StrJoin(boundaries, ", "), QuotedList(stage_blocks), QuotedList(block_names),
      absl::StrJoin(seconds, ", "), batch_size, iterations, samples_per_second, Number(final_loss),
      OptionalNumber(test_accuracy), wall_seconds, absl::StrJoin(epoch_json, ", "));
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
