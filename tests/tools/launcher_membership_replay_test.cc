// launch_cluster --membership_from (tools/launcher/membership_replay.h): a finished
// elastic run's membership becomes mode local's cluster.elastic.change list.
#include "tools/launcher/membership_replay.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "proto/config.h"

namespace p3::tools::launcher {
namespace {

config::ExperimentConfig Config(const std::string& text) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig(text, {});
  CATCH_INFO(config.status().message());
  CATCH_REQUIRE(config.ok());
  return *config;
}

constexpr char kSummary[] = R"({"status": "ok", "elastic": {"max_workers": 4, "membership": [
    {"from_iteration": 0, "present": [0, 1]}, {"from_iteration": 100, "present": [0, 1, 2]},
    {"from_iteration": 200, "present": [0, 1]}]}})";

CATCH_TEST_CASE("a summary's membership becomes the local run's workers, max_workers and changes") {
  config::ExperimentConfig config = Config("mode: \"local\" cluster { workers: 5 }");
  absl::StatusOr<std::vector<std::string>> notes = ApplyMembershipFrom(kSummary, &config);
  CATCH_INFO(notes.status().message());
  CATCH_REQUIRE(notes.ok());
  CATCH_CHECK(config.cluster().workers() == 2);
  CATCH_CHECK(config.cluster().elastic().max_workers() == 4);
  CATCH_REQUIRE(config.cluster().elastic().change_size() == 2);
  CATCH_CHECK(config.cluster().elastic().change(0).from_iteration() == 100);
  CATCH_CHECK(config.cluster().elastic().change(0).present_size() == 3);
  CATCH_CHECK(config.cluster().elastic().change(1).from_iteration() == 200);
  CATCH_CHECK(config.cluster().elastic().change(1).present_size() == 2);
  CATCH_CHECK(notes->back() == "cluster.elastic.change: {0, 1, 2} from 100, {0, 1} from 200");
  absl::StatusOr<MembershipSchedule> schedule = config::ElasticSchedule(config);
  CATCH_REQUIRE(schedule.ok());
  CATCH_CHECK(schedule->SamplesBefore(250, 1) == 2 * 100 + 3 * 100 + 2 * 50);
}

CATCH_TEST_CASE("a worker's result works too; max_workers is then its highest rank + 1") {
  config::ExperimentConfig config = Config("mode: \"local\"");
  CATCH_REQUIRE(ApplyMembershipFrom(R"({"rank": 2, "membership": [
      {"from_iteration": 0, "present": [0, 1]},
      {"from_iteration": 7, "present": [0, 1, 2]}]})",
                                    &config)
                    .ok());
  CATCH_CHECK(config.cluster().elastic().max_workers() == 3);
  CATCH_CHECK(config.cluster().elastic().change_size() == 1);
}

CATCH_TEST_CASE("a record without a membership, a bad first set or a cluster mode is refused") {
  const config::ExperimentConfig local = Config("mode: \"local\"");
  auto error = [](config::ExperimentConfig config, const std::string& text) {
    const config::ExperimentConfig before = config;
    absl::StatusOr<std::vector<std::string>> notes = ApplyMembershipFrom(text, &config);
    CATCH_CHECK(config.DebugString() == before.DebugString());  // unchanged
    return notes.ok() ? std::string("ok") : std::string(notes.status().message());
  };
  CATCH_CHECK(absl::StrContains(error(local, "[1, 2]"), "not a JSON object"));
  CATCH_CHECK(absl::StrContains(error(local, "{\"status\": \"ok\"}"), "records no membership"));
  CATCH_CHECK(absl::StrContains(
      error(local, R"({"membership": [{"from_iteration": 0, "present": [1, 2]}]})"),
      "ranks 0..n-1 from iteration 0, got {1, 2} from iteration 0"));
  CATCH_CHECK(absl::StrContains(
      error(local, R"({"membership": [{"from_iteration": 0, "present": [0]},
                                       {"from_iteration": 5, "present": [0, 1]},
                                       {"from_iteration": 9, "present": [0]},
                                       {"from_iteration": 12, "present": [0, 1]}]})"),
      "cluster.elastic.change[2]: membership change to workers {0, 1} from iteration 12: rank 1 "
      "has left the run"));
  CATCH_CHECK(absl::StrContains(error(local, R"({"membership": [{"from_iteration": 0}]})"),
                                "is not {\"from_iteration\": T, \"present\": [ranks]}"));
  CATCH_CHECK(absl::StrContains(error(Config("mode: \"p3\""), kSummary),
                                "add --set=mode=local"));
}

}  // namespace
}  // namespace p3::tools::launcher
