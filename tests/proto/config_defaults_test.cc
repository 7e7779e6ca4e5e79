// The config loader's defaults: what an empty or partial config is filled with
// (config.proto), automatic values kept automatic, and the resolved text that loads
// back to the same config.
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

CATCH_TEST_CASE("an empty config gets every default from config.proto") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig("", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->name() == "experiment");
  CATCH_CHECK(config->mode() == "p3");
  CATCH_CHECK(config->output_dir() == "out/experiment");
  CATCH_CHECK(config->cluster().workers() == 2);
  CATCH_CHECK(config->cluster().servers() == 2);
  CATCH_CHECK(config->cluster().host() == "127.0.0.1");
  CATCH_CHECK(config->cluster().peer_timeout_s() == 60);
  CATCH_CHECK(config->cluster().stall_report_s() == 10);
  CATCH_CHECK(config->model().name() == "small_cnn");
  CATCH_CHECK(config->model().num_classes() == 10);
  CATCH_CHECK(config->model().image_size() == 0);
  CATCH_CHECK(config->data().dataset() == "fashion_mnist");
  CATCH_CHECK(config->data().path() == "/usr/share/datasets/fashion-mnist");
  CATCH_CHECK(config->data().synthetic_size() == 4096);
  CATCH_CHECK(config->optimizer().name() == "sgd");
  CATCH_CHECK(config->optimizer().lr() == 0.05);
  CATCH_CHECK(config->optimizer().momentum() == 0.9);
  CATCH_CHECK(config->optimizer().weight_decay() == 1e-4);
  CATCH_CHECK(config->optimizer().beta1() == 0.9);
  CATCH_CHECK(config->optimizer().beta2() == 0.999);
  CATCH_CHECK(config->optimizer().eps() == 1e-8);
  CATCH_CHECK(config->training().batch_size() == 32);
  CATCH_CHECK(config->training().epochs() == 1);
  CATCH_CHECK(config->training().iterations() == 0);
  CATCH_CHECK(config->training().seed() == 1);
  CATCH_CHECK(config->training().warmup_iterations() == 5);
  CATCH_CHECK(config->training().evaluate());
  CATCH_CHECK(config->training().log_every() == 20);
  CATCH_CHECK(config->training().threads() == 1);
  // Absent: automatic, resolved by launch_cluster; 40000 in a process started without it.
  CATCH_CHECK(!config->scheduling().has_slice_params());
  CATCH_CHECK(EffectiveSliceParams(*config) == 40000);
  CATCH_CHECK(config->scheduling().split_threshold() == 1000000);
  CATCH_CHECK(config->scheduling().credit_bytes() == 0);  // one message at a time
  CATCH_CHECK(config->scheduling().wire_dtype() == "float32");
}

CATCH_TEST_CASE("the model is saved by default; init_from is empty, and refused in pipeline mode") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig("", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->output().save_model());
  CATCH_CHECK(config->output().model_file().empty());  // <output_dir>/model.pt
  CATCH_CHECK(config->model().init_from().empty());
  config = ParseConfig("output { save_model: false }", {"model.init_from=/tmp/m.pt"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(!config->output().save_model());
  CATCH_CHECK(config->model().init_from() == "/tmp/m.pt");
  const std::string error = ErrorOf("mode: \"pipeline\" model { init_from: \"m.pt\" }");
  CATCH_CHECK(absl::StrContains(error, "model.init_from"));
}

CATCH_TEST_CASE("output_dir defaults to out/<name>") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig("name: \"run7\"", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->output_dir() == "out/run7");
}

CATCH_TEST_CASE("adam gets adam's default learning rate, sgd keeps an explicit one") {
  absl::StatusOr<ExperimentConfig> adam = ParseConfig("optimizer { name: \"adam\" }", {});
  CATCH_REQUIRE(adam.ok());
  CATCH_CHECK(adam->optimizer().lr() == 0.001);
  absl::StatusOr<ExperimentConfig> sgd = ParseConfig("optimizer { lr: 0.2 }", {});
  CATCH_REQUIRE(sgd.ok());
  CATCH_CHECK(sgd->optimizer().lr() == 0.2);
}

CATCH_TEST_CASE("optional fields keep an explicit zero or false") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig(
      "optimizer { momentum: 0 weight_decay: 0 }\n"
      "training { evaluate: false threads: 0 }\n",
      {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->optimizer().momentum() == 0);
  CATCH_CHECK(config->optimizer().weight_decay() == 0);
  CATCH_CHECK_FALSE(config->training().evaluate());
  CATCH_CHECK(config->training().threads() == 0);
}

CATCH_TEST_CASE("the resolved text parses back to the same config") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig(
      "name: \"x\" mode: \"baseline\" optimizer { momentum: 0 lr: 0.125 }\n"
      "training { evaluate: false iterations: 7 }\n",
      {});
  CATCH_REQUIRE(config.ok());
  const std::string text = ConfigToText(*config);
  absl::StatusOr<ExperimentConfig> again = ParseConfig(text, {});
  CATCH_REQUIRE(again.ok());
  CATCH_CHECK(again->SerializeAsString() == config->SerializeAsString());
  CATCH_CHECK(ConfigToText(*again) == text);
}

CATCH_TEST_CASE("a schedule section gets its defaults; a config without one has none") {
  absl::StatusOr<ExperimentConfig> plain = ParseConfig("", {});
  CATCH_REQUIRE(plain.ok());
  CATCH_CHECK_FALSE(plain->optimizer().has_schedule());
  absl::StatusOr<ExperimentConfig> step =
      ParseConfig("optimizer { schedule { name: \"step\" step_size: 100 } }", {});
  CATCH_REQUIRE(step.ok());
  CATCH_CHECK(step->optimizer().schedule().gamma() == 0.1);
  CATCH_CHECK_FALSE(step->optimizer().schedule().has_warmup_start_factor());
  absl::StatusOr<ExperimentConfig> warm =
      ParseConfig("optimizer { schedule { warmup_iterations: 50 } }", {});
  CATCH_REQUIRE(warm.ok());
  CATCH_CHECK(warm->optimizer().schedule().name() == "constant");
  CATCH_CHECK(warm->optimizer().schedule().warmup_start_factor() == 1.0 / 3.0);
  CATCH_CHECK_FALSE(warm->optimizer().schedule().has_gamma());
  // Overrides reach the schedule's scalar fields.
  absl::StatusOr<ExperimentConfig> cosine =
      ParseConfig("", {"optimizer.schedule.name=cosine", "optimizer.schedule.t_max=937"});
  CATCH_REQUIRE(cosine.ok());
  CATCH_CHECK(cosine->optimizer().schedule().t_max() == 937);
  // The resolved text loads back to the same config.
  absl::StatusOr<ExperimentConfig> again = ParseConfig(ConfigToText(*warm), {});
  CATCH_REQUIRE(again.ok());
  CATCH_CHECK(again->optimizer().schedule().warmup_start_factor() ==
              warm->optimizer().schedule().warmup_start_factor());
}

CATCH_TEST_CASE("local mode accepts several workers and multiplies the batch") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("mode: \"local\" cluster { workers: 4 } training { batch_size: 16 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(GlobalBatchSize(*config) == 64);
  CATCH_CHECK(WorkerProcessCount(*config) == 1);
  CATCH_CHECK(ServerProcessCount(*config) == 0);
}

CATCH_TEST_CASE("a zero non-optional field means its default, in the file and in overrides") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("cluster { workers: 0 }", {"training.batch_size=0"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->cluster().workers() == 2);
  CATCH_CHECK(config->training().batch_size() == 32);
}

CATCH_TEST_CASE("slice_params: absent and an explicit 0 are automatic, told apart; N is N") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig("scheduling { credit_bytes: 4096 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(!config->scheduling().has_slice_params());
  CATCH_CHECK(SliceParamsAuto(*config));
  CATCH_CHECK(SliceParamsAbsent(*config));
  // A process started without the launcher: the default, the same on every process.
  CATCH_CHECK(EffectiveSliceParams(*config) == 40000);
  // The resolved config keeps it absent (no "slice_params: 40000" written for it).
  absl::StatusOr<ExperimentConfig> absent_again = ParseConfig(ConfigToText(*config), {});
  CATCH_REQUIRE(absent_again.ok());
  CATCH_CHECK(SliceParamsAbsent(*absent_again));

  // Packs: absent is the default, 0 none, N exactly N.
  CATCH_CHECK(!config->scheduling().has_pack_params());
  CATCH_CHECK(EffectivePackParams(*config) == 65536);
  for (const int64_t n : {int64_t{0}, int64_t{1000}}) {
    absl::StatusOr<ExperimentConfig> packed =
        ParseConfig(absl::StrCat("scheduling { pack_params: ", n, " }"), {});
    CATCH_REQUIRE(packed.ok());
    CATCH_CHECK(EffectivePackParams(*packed) == n);
  }

  // An explicit N means exactly N, 40000 included.
  for (const int64_t n : {int64_t{40000}, int64_t{123}}) {
    config = ParseConfig(absl::StrCat("scheduling { slice_params: ", n, " }"), {});
    CATCH_REQUIRE(config.ok());
    CATCH_CHECK(!SliceParamsAuto(*config));
    CATCH_CHECK(!SliceParamsAbsent(*config));
    CATCH_CHECK(EffectiveSliceParams(*config) == n);
  }

  for (const auto& [text, overrides] :
       {std::make_pair(std::string("scheduling { slice_params: 0 }"), std::vector<std::string>{}),
        std::make_pair(std::string(""), std::vector<std::string>{"scheduling.slice_params=0"})}) {
    config = ParseConfig(text, overrides);
    CATCH_REQUIRE(config.ok());
    CATCH_CHECK(config->scheduling().slice_params() == 0);
    CATCH_CHECK(SliceParamsAuto(*config));
    CATCH_CHECK(!SliceParamsAbsent(*config));
    // A process started without the launcher: the default, the same on every process.
    CATCH_CHECK(EffectiveSliceParams(*config) == 40000);
    // The resolved config keeps "automatic": loading it again does not turn it into 40000.
    const std::string resolved = ConfigToText(*config);
    CATCH_CHECK(absl::StrContains(resolved, "slice_params: 0"));
    absl::StatusOr<ExperimentConfig> again = ParseConfig(resolved, {});
    CATCH_REQUIRE(again.ok());
    CATCH_CHECK(SliceParamsAuto(*again));
  }

  // What the launcher does with its choice: a later override makes it concrete.
  config = ParseConfig("scheduling { slice_params: 0 }", {"scheduling.slice_params=80000"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(!SliceParamsAuto(*config));
  CATCH_CHECK(EffectiveSliceParams(*config) == 80000);
}

CATCH_TEST_CASE("credit_bytes -1 is automatic; a process without the launcher reads it as 0") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig("scheduling { credit_bytes: -1 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->scheduling().credit_bytes() == -1);
  CATCH_CHECK(CreditBytesAuto(*config));
  CATCH_CHECK(EffectiveCreditBytes(*config) == 0);

  config = ParseConfig("", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(!CreditBytesAuto(*config));
  CATCH_CHECK(EffectiveCreditBytes(*config) == 0);
  config = ParseConfig("", {"scheduling.credit_bytes=4194304"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(EffectiveCreditBytes(*config) == 4194304);
}

CATCH_TEST_CASE("a positive credit is kept, in the file and in overrides") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig("scheduling { credit_bytes: 4096 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->scheduling().credit_bytes() == 4096);
  config = ParseConfig("", {"scheduling.credit_bytes=1048576"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->scheduling().credit_bytes() == 1048576);
}

}  // namespace
}  // namespace p3::config
