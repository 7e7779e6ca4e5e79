#include "tools/launcher/membership_replay.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "p3/base/status_macros.h"
#include "proto/config.h"

namespace p3::tools::launcher {
namespace {

using Json = nlohmann::json;

// The sets of `list` ([{"from_iteration": T, "present": [...]}, ...]).
absl::StatusOr<std::vector<MembershipChange>> ParseChanges(const Json& list) {
  if (!list.is_array() || list.empty()) {
    return absl::InvalidArgumentError("\"membership\" is not a non-empty list");
  }
  std::vector<MembershipChange> changes;
  for (const Json& item : list) {
    MembershipChange change;
    if (!item.is_object() || !item.contains("from_iteration") ||
        !item["from_iteration"].is_number_unsigned() || !item.contains("present") ||
        !item["present"].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a membership entry is not {\"from_iteration\": T, \"present\": [ranks]}: ",
          item.dump()));
    }
    change.from_iteration = item["from_iteration"].get<uint64_t>();
    for (const Json& rank : item["present"]) {
      if (!rank.is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat("a rank is not an integer: ", item.dump()));
      }
      change.present.push_back(rank.get<int>());
    }
    changes.push_back(std::move(change));
  }
  return changes;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ApplyMembershipFrom(absl::string_view text,
                                                             config::ExperimentConfig* config) {
  if (config->mode() != "local") {
    return absl::InvalidArgumentError(absl::StrCat(
        "replays a membership in mode \"local\" (the config's mode is \"", config->mode(),
        "\"); add --set=mode=local"));
  }
  const Json record = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return absl::InvalidArgumentError("that is not a JSON object");
  // summary.json: "elastic": {"max_workers", "membership"}; a worker's result: "membership".
  const Json* list = nullptr;
  int max_workers = 0;
  if (record.contains("elastic") && record["elastic"].is_object() &&
      record["elastic"].contains("membership")) {
    list = &record["elastic"]["membership"];
    if (record["elastic"].contains("max_workers") &&
        record["elastic"]["max_workers"].is_number_integer()) {
      max_workers = record["elastic"]["max_workers"].get<int>();
    }
  } else if (record.contains("membership")) {
    list = &record["membership"];
  } else {
    return absl::InvalidArgumentError(
        "it records no membership (no \"elastic\": {\"membership\"} as in an elastic run's "
        "summary.json, nor \"membership\" as in a worker's result)");
  }
  P3_ASSIGN_OR_RETURN(const std::vector<MembershipChange> changes, ParseChanges(*list));
  const std::vector<int>& first = changes.front().present;
  bool initial = changes.front().from_iteration == 0 && !first.empty();
  for (size_t r = 0; r < first.size(); ++r) initial = initial && first[r] == static_cast<int>(r);
  if (!initial) {
    return absl::InvalidArgumentError(
        absl::StrCat("the first membership entry must be ranks 0..n-1 from iteration 0, got {",
                     DescribeRanks(first), "} from iteration ", changes.front().from_iteration));
  }
  for (const MembershipChange& c : changes) {
    for (int rank : c.present) max_workers = std::max(max_workers, rank + 1);
  }
  config::ExperimentConfig replay = *config;
  replay.mutable_cluster()->set_workers(static_cast<int>(first.size()));
  config::ElasticConfig* elastic = replay.mutable_cluster()->mutable_elastic();
  elastic->set_max_workers(max_workers);
  elastic->clear_change();
  std::vector<std::string> sets;
  for (size_t i = 1; i < changes.size(); ++i) {
    config::MembershipChangeConfig* change = elastic->add_change();
    change->set_from_iteration(changes[i].from_iteration);
    for (int rank : changes[i].present) change->add_present(rank);
    sets.push_back(absl::StrCat("{", DescribeRanks(changes[i].present), "} from ",
                                changes[i].from_iteration));
  }
  P3_RETURN_IF_ERROR(config::ValidateConfig(replay));
  *config = std::move(replay);
  return std::vector<std::string>{
      absl::StrCat("cluster.workers=", first.size()),
      absl::StrCat("cluster.elastic.max_workers=", max_workers),
      absl::StrCat("cluster.elastic.change: ", sets.empty() ? "none" : absl::StrJoin(sets, ", "))};
}

}  // namespace p3::tools::launcher
