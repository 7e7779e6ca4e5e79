// Configs the loader refuses, and what it says: the field's path, its line and column,
// and what is allowed instead.
#include "proto/config.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/proto/config_test_util.h"

namespace p3::config {
namespace {

CATCH_TEST_CASE("an unknown field is named with its path, position and the allowed fields") {
  const std::string error = ErrorOf("name: \"a\"\ntraining {\n  batch_sizee: 3\n}\n");
  CATCH_INFO(error);
  CATCH_CHECK(absl::StartsWith(error, "3:3: training.batch_sizee: unknown field"));
  CATCH_CHECK(absl::StrContains(error, "batch_size, epochs, iterations"));
}

CATCH_TEST_CASE("an unknown top-level field lists the top-level fields") {
  const std::string error = ErrorOf("trainng { batch_size: 3 }");
  CATCH_INFO(error);
  CATCH_CHECK(absl::StartsWith(error, "1:1: trainng: unknown field"));
  CATCH_CHECK(absl::StrContains(error, "name, mode, cluster, model"));
}

CATCH_TEST_CASE("a value of the wrong type names the field and its line") {
  const std::string error = ErrorOf("mode: \"p3\"\ncluster {\n  workers: \"two\"\n}\n");
  CATCH_CHECK(error == "3:12: cluster.workers: Expected integer, got: \"two\"");
}

CATCH_TEST_CASE("an unquoted string value names the field") {
  const std::string error = ErrorOf("optimizer { lr: 0.1 name: adam }");
  CATCH_INFO(error);
  CATCH_CHECK(absl::StrContains(error, "optimizer.name"));
  CATCH_CHECK(absl::StrContains(error, "string"));
}

CATCH_TEST_CASE("a syntax error gives line and column") {
  const std::string error = ErrorOf("cluster {\n  workers: 2\n");
  CATCH_INFO(error);
  CATCH_CHECK(absl::StartsWith(error, "3:1: "));
  CATCH_CHECK(absl::StrContains(error, "got: end of input"));
}

CATCH_TEST_CASE("a field after a nested message is named with its own path") {
  const std::string error =
      ErrorOf("cluster { workers: 2 }\ntraining { batch_size: 4 }\nmode: 3\n");
  CATCH_CHECK(absl::StartsWith(error, "3:7: mode: Expected string"));
}

CATCH_TEST_CASE("out-of-range values name the field and the allowed range") {
  CATCH_CHECK(ErrorOf("cluster { workers: -1 }") ==
              "cluster.workers: -1 is out of range; allowed 1..64");
  CATCH_CHECK(ErrorOf("cluster { servers: 65 }") ==
              "cluster.servers: 65 is out of range; allowed 1..64");
  CATCH_CHECK(absl::StrContains(ErrorOf("optimizer { momentum: 1 }"),
                                "optimizer.momentum: 1 is out of range; allowed [0, 1)"));
  CATCH_CHECK(absl::StrContains(ErrorOf("optimizer { lr: -0.5 }"),
                                "optimizer.lr: -0.5 is out of range; allowed > 0"));
  CATCH_CHECK(absl::StrContains(ErrorOf("optimizer { weight_decay: -1 }"),
                                "optimizer.weight_decay: -1 is out of range; allowed >= 0"));
  CATCH_CHECK(absl::StrContains(ErrorOf("training { batch_size: -4 }"),
                                "training.batch_size: -4 is out of range; allowed >= 1"));
  CATCH_CHECK(absl::StrContains(ErrorOf("scheduling { slice_params: -1 }"),
                                "scheduling.slice_params: -1 is out of range; allowed >= 0 "
                                "(0: automatic, chosen by launch_cluster with the simulator)"));
  CATCH_CHECK(absl::StrContains(ErrorOf("scheduling { credit_bytes: -2 }"),
                                "scheduling.credit_bytes: -2 is out of range; allowed >= -1 "
                                "(0: one message at a time, -1: automatic"));
  CATCH_CHECK(absl::StrContains(ErrorOf("cluster { peer_timeout_s: -1 }"),
                                "cluster.peer_timeout_s: -1 is out of range; allowed > 0"));
  CATCH_CHECK(absl::StrContains(ErrorOf("cluster { stall_report_s: -2 }"),
                                "cluster.stall_report_s: must be 0 (no reports) or a positive"));
  // 0 turns the reports off; it is kept, not replaced by the default.
  absl::StatusOr<ExperimentConfig> off = ParseConfig("cluster { stall_report_s: 0 }", {});
  CATCH_REQUIRE(off.ok());
  CATCH_CHECK(off->cluster().stall_report_s() == 0);
  CATCH_CHECK(absl::StrContains(ErrorOf("cluster { rejoin_timeout_s: -2 }"),
                                "cluster.rejoin_timeout_s: -2 is out of range; allowed >= 0"));
  CATCH_CHECK(absl::StrContains(ErrorOf("cluster { rejoin_timeout_s: inf }"),
                                "cluster.rejoin_timeout_s: inf is out of range"));
}

CATCH_TEST_CASE("an elastic cluster names its size and every feature it cannot combine with") {
  CATCH_CHECK(absl::StrContains(ErrorOf("cluster { workers: 2 elastic { max_workers: 1 } }"),
                                "cluster.elastic.max_workers: 1 is out of range; allowed 2..64"));
  CATCH_CHECK(absl::StrContains(ErrorOf("cluster { workers: 2 elastic { max_workers: 65 } }"),
                                "cluster.elastic.max_workers: 65 is out of range"));
  const std::string all = ErrorOf(
      "mode: \"local\" cluster { elastic { max_workers: 3 } rejoin_timeout_s: 5 } "
      "checkpoint { dir: \"c\" every: 5 }");
  CATCH_CHECK(absl::StrContains(all, "cluster.rejoin_timeout_s: > 0 (rejoins of dead workers) "
                                     "cannot be combined with cluster.elastic"));
  // Checkpoints combine with elastic membership (a checkpoint records the membership).
  CATCH_CHECK(!absl::StrContains(all, "checkpoint.every"));
  CATCH_CHECK(ParseConfig("cluster { workers: 2 elastic { max_workers: 3 } } "
                          "checkpoint { dir: \"c\" every: 5 }",
                          {})
                  .ok());
  CATCH_CHECK(absl::StrContains(ErrorOf("mode: \"pipeline\" cluster { elastic {} }"),
                                "mode: \"pipeline\" (no servers) cannot be combined"));
  CATCH_CHECK(absl::StrContains(ErrorOf("mode: \"baseline\" cluster { elastic {} }"),
                                "mode: \"baseline\" (values are pulled) cannot be combined"));
  absl::StatusOr<ExperimentConfig> ok =
      ParseConfig("cluster { workers: 2 elastic { max_workers: 3 } }", {});
  CATCH_REQUIRE(ok.ok());
  CATCH_CHECK(MaxWorkers(*ok) == 3);
  CATCH_CHECK(GlobalBatchSize(*ok) == 2 * ok->training().batch_size());
  absl::StatusOr<ExperimentConfig> same = ParseConfig("cluster { workers: 2 elastic {} }", {});
  CATCH_REQUIRE(same.ok());
  CATCH_CHECK(MaxWorkers(*same) == 2);
  CATCH_CHECK(MaxWorkers(*ParseConfig("cluster { workers: 4 }", {})) == 4);
}

CATCH_TEST_CASE("mode local replays an elastic membership; a bad change is named by its index") {
  absl::StatusOr<ExperimentConfig> replay = ParseConfig(
      "mode: \"local\" cluster { workers: 2 elastic { max_workers: 3 "
      "change { from_iteration: 100 present: [0, 1, 2] } "
      "change { from_iteration: 200 present: [0, 1] } } }",
      {});
  CATCH_REQUIRE(replay.ok());
  absl::StatusOr<MembershipSchedule> schedule = ElasticSchedule(*replay);
  CATCH_REQUIRE(schedule.ok());
  CATCH_CHECK(schedule->PresentAt(99) == std::vector<int>{0, 1});
  CATCH_CHECK(schedule->PresentAt(150) == std::vector<int>{0, 1, 2});
  CATCH_CHECK(schedule->PresentAt(250) == std::vector<int>{0, 1});
  CATCH_CHECK(schedule->SamplesBefore(300, 8) == 8 * (2 * 100 + 3 * 100 + 2 * 100));
  // Out of order, a rank that left coming back, rank 0 missing, a rank beyond max_workers.
  CATCH_CHECK(absl::StrContains(
      ErrorOf("mode: \"local\" cluster { workers: 2 elastic { max_workers: 3 "
              "change { from_iteration: 100 present: [0, 1, 2] } "
              "change { from_iteration: 100 present: [0, 1] } } }"),
      "cluster.elastic.change[1]: membership change to workers {0, 1} from iteration 100: "
      "the last change took effect at iteration 100"));
  CATCH_CHECK(absl::StrContains(
      ErrorOf("mode: \"local\" cluster { workers: 2 elastic { max_workers: 3 "
              "change { from_iteration: 100 present: [0] } "
              "change { from_iteration: 200 present: [0, 1] } } }"),
      "cluster.elastic.change[1]: membership change to workers {0, 1} from iteration 200: "
      "rank 1 has left the run"));
  CATCH_CHECK(absl::StrContains(
      ErrorOf("mode: \"local\" cluster { workers: 2 elastic { max_workers: 3 "
              "change { from_iteration: 5 present: [1, 2] } } }"),
      "cluster.elastic.change[0]: membership change to workers {1, 2} from iteration 5: rank 0 "
      "must be present"));
  CATCH_CHECK(absl::StrContains(
      ErrorOf("mode: \"local\" cluster { workers: 2 elastic { max_workers: 3 "
              "change { from_iteration: 5 present: [0, 3] } } }"),
      "cluster.elastic.change[0]: membership change to workers {0, 3} from iteration 5: rank 3 "
      "is out of range for 3 ranks"));
  // A cluster's changes come from requests, not from the config.
  CATCH_CHECK(absl::StrContains(
      ErrorOf("mode: \"p3\" cluster { workers: 2 elastic { max_workers: 3 "
              "change { from_iteration: 100 present: [0, 1, 2] } } }"),
      "cluster.elastic.change: is a membership for mode \"local\" to replay"));
}

CATCH_TEST_CASE("names outside their allowed set list the allowed values") {
  CATCH_CHECK(absl::StrContains(
      ErrorOf("mode: \"fast\""),
      "mode: \"fast\" is not allowed; allowed: \"p3\", \"baseline\", \"slicing_only\", "
      "\"priority_only\", \"values_only\", \"no_overlap\", \"no_backward_overlap\", "
      "\"no_forward_overlap\", \"local\", \"pipeline\""));
  CATCH_CHECK(absl::StrContains(ErrorOf("data { dataset: \"cifar\" }"),
                                "data.dataset: \"cifar\" is not allowed; allowed: "
                                "\"fashion_mnist\", \"synthetic\""));
  CATCH_CHECK(absl::StrContains(ErrorOf("optimizer { name: \"rmsprop\" }"),
                                "optimizer.name: \"rmsprop\" is not allowed; allowed: "
                                "\"sgd\", \"adam\""));
}

CATCH_TEST_CASE("bad schedule fields are named with what is allowed") {
  CATCH_CHECK(ErrorOf("optimizer { schedule { name: \"cosin\" t_max: 10 } }") ==
              "optimizer.schedule.name: \"cosin\" is not allowed; allowed: \"constant\", "
              "\"step\", \"multi_step\", \"exponential\", \"cosine\"");
  CATCH_CHECK(ErrorOf("optimizer { schedule { name: \"cosine\" } }") ==
              "optimizer.schedule.t_max: 0 is out of range; allowed >= 1 for \"cosine\"");
  CATCH_CHECK(ErrorOf("optimizer { schedule { name: \"exponential\" } }") ==
              "optimizer.schedule.gamma: required for \"exponential\"");
  CATCH_CHECK(ErrorOf("optimizer { schedule { name: \"cosine\" t_max: 5 gamma: 0.5 } }") ==
              "optimizer.schedule.gamma: used only by \"step\", \"multi_step\", "
              "\"exponential\"; the schedule is \"cosine\"");
  CATCH_CHECK(ErrorOf("optimizer { schedule { warmup_start_factor: 0.1 } }") ==
              "optimizer.schedule.warmup_start_factor: used only with "
              "optimizer.schedule.warmup_iterations > 0");
  CATCH_CHECK(ErrorOf("optimizer { schedule { name: \"multi_step\" milestones: [5, 2] } }") ==
              "optimizer.schedule.milestones: [5, 2] is not allowed; allowed: strictly "
              "increasing, each >= 1");
  CATCH_CHECK(ErrorOf("optimizer { schedule { name: \"step\" step_size: 3 t_max: 9 } }") ==
              "optimizer.schedule.t_max: used only by \"cosine\"; the schedule is \"step\"");
  CATCH_CHECK(ErrorOf("optimizer { schedule { warmup_iterations: 4 warmup_start_factor: 2 } }") ==
              "optimizer.schedule.warmup_start_factor: 2 is out of range; allowed (0, 1]");
}

CATCH_TEST_CASE("every invalid field is reported, one per line") {
  const std::string error = ErrorOf("cluster { workers: 100 servers: 100 }");
  CATCH_CHECK(error ==
              "cluster.workers: 100 is out of range; allowed 1..64\n"
              "cluster.servers: 100 is out of range; allowed 1..64");
}

CATCH_TEST_CASE("online_search: refused where a re-plan cannot happen, naming the field") {
  for (const auto& [text, reason] : std::vector<std::pair<std::string, std::string>>{
           {"mode: \"baseline\" scheduling { online_search: true }", "mode baseline"},
           {"scheduling { online_search: true wire_dtype: \"float16\" }", "float16"},
           {"scheduling { owner_params: -2 }", "scheduling.owner_params"},
           {"scheduling { pack_params: -1 }", "scheduling.pack_params"}}) {
    CATCH_CAPTURE(text);
    absl::StatusOr<ExperimentConfig> config = ParseConfig(text, {});
    CATCH_REQUIRE(!config.ok());
    CATCH_CHECK(absl::StrContains(config.status().message(), reason));
  }
  // Allowed: the stripes the search needs, 4x the slice size, at most 1000000.
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("scheduling { online_search: true slice_params: 80000 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(EffectiveOwnerParams(*config) == 320000);
  config = ParseConfig("scheduling { online_search: true slice_params: 500000 }", {});
  CATCH_CHECK(EffectiveOwnerParams(*config) == 1000000);
  // With checkpoints: a checkpoint records the plan it was taken under (ShardCheckpoint).
  config = ParseConfig(
      "scheduling { online_search: true slice_params: 80000 } checkpoint { dir: \"/tmp/c\" "
      "every: 5 }",
      {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(OnlineSearchRuledOutBy(*config).empty());
  config = ParseConfig("scheduling { owner_params: 7 }", {});
  CATCH_CHECK(EffectiveOwnerParams(*config) == 7);
  config = ParseConfig("", {});
  CATCH_CHECK(EffectiveOwnerParams(*config) == 0);
  CATCH_CHECK(!config->scheduling().has_online_search());
}

CATCH_TEST_CASE("scheduling.wire_dtype takes the three names and refuses others, listing them") {
  for (const char* name : {"float32", "bfloat16", "float16"}) {
    absl::StatusOr<ExperimentConfig> config =
        ParseConfig("", {absl::StrCat("scheduling.wire_dtype=", name)});
    CATCH_REQUIRE(config.ok());
    CATCH_CHECK(config->scheduling().wire_dtype() == name);
  }
  CATCH_CHECK(absl::StrContains(ErrorOf("scheduling { wire_dtype: \"fp16\" }"),
                                "scheduling.wire_dtype: \"fp16\" is not allowed; allowed: "
                                "\"float32\", \"bfloat16\", \"float16\""));
}

CATCH_TEST_CASE("worker.command: blank, or in a mode without servers, is refused naming it") {
  CATCH_CHECK(ErrorOf("worker { command: \"  \" }") ==
              "worker.command: is empty; give a shell command (e.g. \"python3 train.py\"), or "
              "leave the worker section out to run p3_worker");
  CATCH_CHECK(ErrorOf("worker { }").find("(no error)") != std::string::npos);
  for (const char* mode : {"local", "pipeline"}) {
    CATCH_CAPTURE(mode);
    const std::string error =
        ErrorOf(absl::StrCat("mode: \"", mode, "\" worker { command: \"python3 train.py\" }"));
    CATCH_CHECK(absl::StartsWith(error, "worker.command: needs servers"));
    CATCH_CHECK(absl::StrContains(error, absl::StrCat("mode \"", mode, "\" has none")));
  }
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("", {"worker.command=python3 train.py --note 'a b'"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->worker().command() == "python3 train.py --note 'a b'");
  // Absent: p3_worker, and the resolved config has no worker section.
  config = ParseConfig("", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(!config->has_worker());
}


CATCH_TEST_CASE("model.output_pieces: only the sequence models take more than one, named") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("model { name: \"transformer\" output_pieces: 4 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->model().output_pieces() == 4);
  CATCH_CHECK(ParseConfig("model { name: \"resnet50\" output_pieces: 1 }", {}).ok());
  const std::string error = ErrorOf("model { name: \"resnet50\" output_pieces: 2 }");
  CATCH_INFO(error);
  CATCH_CHECK(absl::StartsWith(error, "model.output_pieces: applies to the sequence models only"));
  CATCH_CHECK(absl::StrContains(ErrorOf("model { name: \"transformer\" output_pieces: -1 }"),
                                "model.output_pieces"));
}

}  // namespace
}  // namespace p3::config
