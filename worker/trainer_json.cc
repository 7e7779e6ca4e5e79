// TrainResult's JSON and CSV forms (worker/trainer.h).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "absl/strings/str_format.h"
#include "worker/trainer.h"

namespace p3 {

std::string TrainResult::ToJson() const {
  // nlohmann writes NaN and infinity as null: JSON has neither (a diverged run's loss).
  nlohmann::ordered_json j;
  j["rank"] = rank;
  j["iterations"] = iterations;
  j["samples_per_second"] = samples_per_second;
  j["final_loss"] = final_loss;
  j["test_accuracy"] = test_accuracy ? nlohmann::ordered_json(*test_accuracy) : nullptr;
  j["param_l2"] = param_l2;
  j["wall_seconds"] = wall_seconds;
  j["bytes_sent"] = bytes_sent;
  j["bytes_received"] = bytes_received;
  j["bytes_shared"] = bytes_shared;
  j["forward_wait_seconds"] = forward_wait_seconds;
  if (!model_file.empty()) j["model_file"] = model_file;
  if (search.has_value()) {
    nlohmann::ordered_json o;
    o["chosen_slice_params"] = search->chosen;
    o["done_iteration"] = search->done_iteration;
    o["reason"] = search->reason;
    nlohmann::ordered_json timed = nlohmann::ordered_json::array();
    for (const SliceSearchCandidateReport& c : search->candidates) {
      nlohmann::ordered_json row;
      row["slice_params"] = c.slice_params;
      row["from_iteration"] = c.from_iteration;
      row["iterations"] = c.iterations;
      row["seconds"] = c.seconds;
      row["mean_seconds"] = c.mean_seconds;
      timed.push_back(row);
    }
    o["timed"] = timed;
    j["online_search"] = o;
  }
  // Per epoch: this worker's mean training loss, and rank 0's test accuracy.
  nlohmann::ordered_json per_epoch = nlohmann::ordered_json::array();
  for (const EpochRecord& e : epochs) {
    nlohmann::ordered_json row;
    row["epoch"] = e.epoch;
    row["end_iteration"] = e.end_iteration;
    row["train_loss"] = e.train_loss;
    row["test_accuracy"] = e.test_accuracy ? nlohmann::ordered_json(*e.test_accuracy) : nullptr;
    per_epoch.push_back(row);
  }
  j["epochs"] = per_epoch;
  if (!membership.empty()) {
    nlohmann::ordered_json changes = nlohmann::ordered_json::array();
    for (const MembershipChange& c : membership) {
      changes.push_back({{"from_iteration", c.from_iteration}, {"present", c.present}});
    }
    j["membership"] = changes;
    j["samples_trained"] = samples_trained;
    j["iterations_trained"] = iterations_trained;
  }
  return j.dump();
}

const char TrainResult::kRecordsCsvHeader[] =
    "iteration,loss,iteration_seconds,samples_per_second,epoch,epoch_loss,test_accuracy\n";

std::string TrainResult::RecordsCsv() const {
  std::ostringstream csv;
  csv << kRecordsCsvHeader;
  WriteRecordsCsvRows(csv);
  return csv.str();
}

void TrainResult::WriteRecordsCsvRows(std::ostream& out, size_t first_epoch) const {
  // Each row is formatted into a buffer on the stack: a run that streams its records
  // (TrainerOptions::records) allocates nothing for them once its epoch's vector is full.
  // Holes left by growing strings kept a glibc heap growing (soak.md, "Creep without
  // faults").
  char row[256];
  size_t next_epoch = first_epoch;  // epochs and records are both in iteration order
  for (const IterationRecord& r : records) {
    int n = std::snprintf(row, sizeof(row), "%lld,%.6f,%.6f,%.3f,",
                          static_cast<long long>(r.iteration), r.loss, r.seconds,
                          r.samples_per_second);
    while (next_epoch < epochs.size() && epochs[next_epoch].end_iteration <= r.iteration) {
      ++next_epoch;
    }
    const size_t room = sizeof(row) - static_cast<size_t>(std::max(0, n));
    char* rest = row + std::max(0, n);
    if (next_epoch < epochs.size() && epochs[next_epoch].end_iteration == r.iteration + 1) {
      const EpochRecord& e = epochs[next_epoch];
      n += e.test_accuracy
               ? std::snprintf(rest, room, "%lld,%.6f,%.6f\n", static_cast<long long>(e.epoch),
                               e.train_loss, *e.test_accuracy)
               : std::snprintf(rest, room, "%lld,%.6f,\n", static_cast<long long>(e.epoch),
                               e.train_loss);
    } else {
      // The epoch this iteration belongs to: the next one to end.
      const int64_t epoch = next_epoch < epochs.size() ? epochs[next_epoch].epoch : 0;
      n += std::snprintf(rest, room, "%lld,,\n", static_cast<long long>(epoch));
    }
    // A row longer than the buffer (a loss of 1e200) is cut, never overrun.
    out.write(row, std::min<std::streamsize>(n, sizeof(row) - 1));
  }
}

}  // namespace p3
