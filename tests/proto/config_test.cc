#include "proto/config.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"

namespace p3::config {
namespace {

std::string ErrorOf(const std::string& text, const std::vector<std::string>& overrides = {}) {
  absl::StatusOr<ExperimentConfig> config = ParseConfig(text, overrides);
  if (config.ok()) return "(no error)";
  CATCH_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

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
  CATCH_CHECK(config->scheduling().slice_params() == 40000);
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

CATCH_TEST_CASE("local mode accepts several workers and multiplies the batch") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("mode: \"local\" cluster { workers: 4 } training { batch_size: 16 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(GlobalBatchSize(*config) == 64);
  CATCH_CHECK(WorkerProcessCount(*config) == 1);
  CATCH_CHECK(ServerProcessCount(*config) == 0);
}

CATCH_TEST_CASE("a field after a nested message is named with its own path") {
  const std::string error =
      ErrorOf("cluster { workers: 2 }\ntraining { batch_size: 4 }\nmode: 3\n");
  CATCH_CHECK(absl::StartsWith(error, "3:7: mode: Expected string"));
}

CATCH_TEST_CASE("overrides set int, double, string and bool fields") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("training { batch_size: 8 }",
                  {"training.batch_size=64", "optimizer.lr=0.01", "mode=baseline",
                   "name=\"quoted\"", "training.evaluate=f", "training.evaluate=false",
                   "cluster.host = ::1", "training.seed=18446744073709551615"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->training().batch_size() == 64);
  CATCH_CHECK(config->optimizer().lr() == 0.01);
  CATCH_CHECK(config->mode() == "baseline");
  CATCH_CHECK(config->name() == "quoted");
  CATCH_CHECK_FALSE(config->training().evaluate());
  CATCH_CHECK(config->cluster().host() == "::1");
  CATCH_CHECK(config->training().seed() == 18446744073709551615ull);
}

CATCH_TEST_CASE("later overrides win and defaults follow the overrides") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("", {"cluster.workers=3", "cluster.workers=5", "optimizer.name=adam"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->cluster().workers() == 5);
  CATCH_CHECK(config->optimizer().lr() == 0.001);
}

CATCH_TEST_CASE("an override with an unknown path names it and lists the allowed fields") {
  const std::string nested = ErrorOf("", {"training.batchsize=64"});
  CATCH_INFO(nested);
  CATCH_CHECK(absl::StrContains(nested,
                                "training.batchsize: unknown field; allowed in training: "
                                "batch_size, epochs, iterations"));
  const std::string top = ErrorOf("", {"trainig.batch_size=64"});
  CATCH_CHECK(absl::StrContains(top, "trainig: unknown field; allowed: name, mode, cluster"));
}

CATCH_TEST_CASE("an override of a message, through a scalar, or without '=' is rejected") {
  CATCH_CHECK(absl::StrContains(ErrorOf("", {"training=3"}),
                                "training is a message; set one of its fields"));
  CATCH_CHECK(absl::StrContains(ErrorOf("", {"mode.x=3"}), "mode is a string, not a message"));
  CATCH_CHECK(absl::StrContains(ErrorOf("", {"training.batch_size"}), "expected field.path=value"));
}

CATCH_TEST_CASE("an override value of the wrong type names the field and its type") {
  const std::string error = ErrorOf("", {"training.batch_size=big"});
  CATCH_INFO(error);
  CATCH_CHECK(absl::StrContains(error, "override 'training.batch_size=big'"));
  CATCH_CHECK(absl::StrContains(error, "training.batch_size (int32)"));
  CATCH_CHECK(
      absl::StrContains(ErrorOf("", {"training.evaluate=maybe"}), "training.evaluate (bool)"));
  CATCH_CHECK(
      absl::StrContains(ErrorOf("", {"training.batch_size=3 4"}), "training.batch_size (int32)"));
}

CATCH_TEST_CASE("an override value is validated like the file") {
  CATCH_CHECK(ErrorOf("", {"cluster.workers=-3"}) ==
              "cluster.workers: -3 is out of range; allowed 1..64");
}

CATCH_TEST_CASE("slice_params: absent is the default 40000, an explicit 0 is automatic and kept") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig("scheduling { credit_bytes: 4096 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->scheduling().slice_params() == 40000);
  CATCH_CHECK(!SliceParamsAuto(*config));
  CATCH_CHECK(EffectiveSliceParams(*config) == 40000);

  for (const auto& [text, overrides] :
       {std::make_pair(std::string("scheduling { slice_params: 0 }"), std::vector<std::string>{}),
        std::make_pair(std::string(""), std::vector<std::string>{"scheduling.slice_params=0"})}) {
    config = ParseConfig(text, overrides);
    CATCH_REQUIRE(config.ok());
    CATCH_CHECK(config->scheduling().slice_params() == 0);
    CATCH_CHECK(SliceParamsAuto(*config));
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

CATCH_TEST_CASE("online_search: refused where a re-plan cannot happen, naming the field") {
  for (const auto& [text, reason] : std::vector<std::pair<std::string, std::string>>{
           {"mode: \"baseline\" scheduling { online_search: true }", "mode baseline"},
           {"scheduling { online_search: true wire_dtype: \"float16\" }", "float16"},
           {"scheduling { online_search: true } checkpoint { dir: \"/tmp/c\" every: 5 }",
            "checkpoint.every"},
           {"scheduling { owner_params: -2 }", "scheduling.owner_params"}}) {
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
  config = ParseConfig("scheduling { owner_params: 7 }", {});
  CATCH_CHECK(EffectiveOwnerParams(*config) == 7);
  config = ParseConfig("", {});
  CATCH_CHECK(EffectiveOwnerParams(*config) == 0);
  CATCH_CHECK(!config->scheduling().has_online_search());
}

CATCH_TEST_CASE("credit_bytes -1 is automatic; a process without the launcher reads it as 0") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig("scheduling { credit_bytes: -1 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->scheduling().credit_bytes() == -1);
  CATCH_CHECK(CreditBytesAuto(*config));
  CATCH_CHECK(EffectiveCreditBytes(*config) == 0);
  CATCH_CHECK(!SliceParamsAuto(*config));  // only what was asked for

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

CATCH_TEST_CASE("a zero non-optional field means its default, in the file and in overrides") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("cluster { workers: 0 }", {"training.batch_size=0"});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->cluster().workers() == 2);
  CATCH_CHECK(config->training().batch_size() == 32);
}

CATCH_TEST_CASE("LoadConfig names the file in errors and reads valid files") {
  const std::string dir =
      std::getenv("TEST_TMPDIR") != nullptr ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string path = dir + "/config_test.textproto";
  {
    std::ofstream file(path);
    file << "cluster {\n  workerz: 3\n}\n";
  }
  absl::StatusOr<ExperimentConfig> bad = LoadConfig(path, {});
  CATCH_REQUIRE_FALSE(bad.ok());
  CATCH_CHECK(absl::StartsWith(bad.status().message(), path + ":2:"));
  CATCH_CHECK(absl::StrContains(bad.status().message(), "cluster.workerz"));
  {
    std::ofstream file(path);
    file << "cluster {\n  workers: 3\n}\n";
  }
  absl::StatusOr<ExperimentConfig> good = LoadConfig(path, {"cluster.servers=1"});
  CATCH_REQUIRE(good.ok());
  CATCH_CHECK(good->cluster().workers() == 3);
  CATCH_CHECK(good->cluster().servers() == 1);
  std::remove(path.c_str());

  absl::StatusOr<ExperimentConfig> missing = LoadConfig(dir + "/does_not_exist.textproto", {});
  CATCH_CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

CATCH_TEST_CASE("every config shipped in configs/ loads and validates") {
  // The test's runfiles hold //configs and //configs:bench (tests/BUILD).
  std::vector<std::string> paths;
  for (const char* dir : {"configs", "configs/bench"}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() == ".textproto") paths.push_back(entry.path().string());
    }
  }
  CATCH_CHECK(paths.size() >= 10);
  for (const std::string& path : paths) {
    CATCH_CAPTURE(path);
    absl::StatusOr<ExperimentConfig> config = LoadConfig(path, {});
    CATCH_CHECK(config.ok());
    if (!config.ok()) CATCH_WARN(config.status().message());
  }
}

CATCH_TEST_CASE("the network section is filled only when the network is emulated") {
  absl::StatusOr<ExperimentConfig> plain = ParseConfig("", {});
  CATCH_REQUIRE(plain.ok());
  CATCH_CHECK(!plain->has_network());
  CATCH_CHECK(!NetworkEmulated(*plain));

  absl::StatusOr<ExperimentConfig> emulated =
      ParseConfig("cluster { workers: 3 servers: 2 } network { bandwidth_gbps: 1 }", {});
  CATCH_REQUIRE(emulated.ok());
  CATCH_CHECK(NetworkEmulated(*emulated));
  CATCH_CHECK(emulated->network().machines() == 3);
  CATCH_CHECK(emulated->network().placement() == "colocated");
  CATCH_CHECK(emulated->network().subnet() == "10.77.0.0/24");
  CATCH_CHECK(emulated->network().tbf_latency_ms() == 20);
  CATCH_CHECK(emulated->network().tbf_burst_bytes() == 0);
  CATCH_CHECK(emulated->network().check_seconds() == 2);
  CATCH_CHECK(!emulated->network().check_links());

  // Mode local starts no servers: nothing to emulate.
  absl::StatusOr<ExperimentConfig> local =
      ParseConfig("mode: \"local\" network { bandwidth_gbps: 1 }", {});
  CATCH_REQUIRE(local.ok());
  CATCH_CHECK(!NetworkEmulated(*local));
}

CATCH_TEST_CASE("colocated placement puts worker i and server i on machine i") {
  absl::StatusOr<ExperimentConfig> config =
      ParseConfig("cluster { workers: 4 servers: 2 } network { bandwidth_gbps: 10 }", {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(MachineCount(*config) == 4);
  for (int r = 0; r < 4; ++r) CATCH_CHECK(WorkerMachine(*config, r, 4) == r);
  CATCH_CHECK(ServerMachine(*config, 0, 4) == 0);
  CATCH_CHECK(ServerMachine(*config, 1, 4) == 1);
  // Fewer machines than processes: round robin.
  CATCH_CHECK(WorkerMachine(*config, 3, 2) == 1);
  CATCH_CHECK(ServerMachine(*config, 1, 1) == 0);
}

CATCH_TEST_CASE("a worker shares memory with the servers on its machine, unless switched off") {
  absl::StatusOr<ExperimentConfig> colocated =
      ParseConfig("cluster { workers: 3 servers: 2 }", {});  // no emulation: same layout
  CATCH_REQUIRE(colocated.ok());
  CATCH_CHECK(colocated->scheduling().shared_memory());
  CATCH_CHECK(SharedMemoryServers(*colocated, 0) == std::vector<int>{0});
  CATCH_CHECK(SharedMemoryServers(*colocated, 1) == std::vector<int>{1});
  CATCH_CHECK(SharedMemoryServers(*colocated, 2).empty());  // machine 2 has no server
  absl::StatusOr<ExperimentConfig> one_machine = ParseConfig(
      "cluster { workers: 2 servers: 2 } network { bandwidth_gbps: 1 machines: 1 }", {});
  CATCH_REQUIRE(one_machine.ok());
  CATCH_CHECK(SharedMemoryServers(*one_machine, 1) == std::vector<int>({0, 1}));
  absl::StatusOr<ExperimentConfig> separate = ParseConfig(
      "cluster { workers: 2 servers: 2 } network { bandwidth_gbps: 1 placement: \"separate\" }",
      {});
  CATCH_REQUIRE(separate.ok());
  CATCH_CHECK(SharedMemoryServers(*separate, 0).empty());
  absl::StatusOr<ExperimentConfig> off =
      ParseConfig("cluster { workers: 2 servers: 2 } scheduling { shared_memory: false }", {});
  CATCH_REQUIRE(off.ok());
  CATCH_CHECK(SharedMemoryServers(*off, 0).empty());
  absl::StatusOr<ExperimentConfig> local = ParseConfig("mode: \"local\"", {});
  CATCH_REQUIRE(local.ok());
  CATCH_CHECK(SharedMemoryServers(*local, 0).empty());
}

CATCH_TEST_CASE("separate placement puts servers after the workers") {
  absl::StatusOr<ExperimentConfig> config = ParseConfig(
      "cluster { workers: 2 servers: 3 } network { bandwidth_gbps: 1 placement: \"separate\" }",
      {});
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->network().machines() == 5);
  CATCH_CHECK(WorkerMachine(*config, 1, 5) == 1);
  CATCH_CHECK(ServerMachine(*config, 0, 5) == 2);
  CATCH_CHECK(ServerMachine(*config, 2, 5) == 4);
}

CATCH_TEST_CASE("bad network fields are named with what is allowed") {
  const std::string base = "cluster { workers: 2 servers: 2 } ";
  CATCH_CHECK(absl::StrContains(ErrorOf(base + "network { bandwidth_gbps: -1 }"),
                                "network.bandwidth_gbps: -1 is out of range; allowed 0..100"));
  CATCH_CHECK(absl::StrContains(ErrorOf(base + "network { bandwidth_gbps: 1 placement: \"x\" }"),
                                "network.placement: \"x\" is not allowed; allowed: \"colocated\", "
                                "\"separate\""));
  CATCH_CHECK(absl::StrContains(
      ErrorOf(base + "network { bandwidth_gbps: 1 subnet: \"10.77.0.0\" }"),
      "network.subnet: \"10.77.0.0\" is not allowed; allowed: an IPv4 subnet a.b.c.d/len"));
  CATCH_CHECK(absl::StrContains(
      ErrorOf(base + "network { bandwidth_gbps: 1 subnet: \"10.77.0.0/31\" }"), "network.subnet"));
  CATCH_CHECK(absl::StrContains(ErrorOf(base + "network { bandwidth_gbps: 1 machines: 500 }"),
                                "network.machines: 500 is out of range; allowed 1..128"));
  CATCH_CHECK(absl::StrContains(
      ErrorOf(base + "network { bandwidth_gbps: 1 placement: \"separate\" machines: 3 }"),
      "network.machines: 3 does not fit placement \"separate\"; allowed: 4"));
  CATCH_CHECK(absl::StrContains(ErrorOf(base + "network { bandwidth_gbps: 1 check_seconds: 100 }"),
                                "network.check_seconds: 100 is out of range; allowed (0, 60]"));
  CATCH_CHECK(ErrorOf(base, {"network.bandwidth_gbps=2.5", "network.check_links=true"}) ==
              "(no error)");
  CATCH_CHECK(absl::StrContains(
      ErrorOf(base, {"network.bandwidth_gbps=1", "network.congestion_control=cubic -w x=1"}),
      "network.congestion_control: \"cubic -w x=1\" is not allowed; allowed: a TCP congestion "
      "control name"));
  CATCH_CHECK(ErrorOf(base, {"network.bandwidth_gbps=1", "network.congestion_control=bbr"}) ==
              "(no error)");
}

}  // namespace
}  // namespace p3::config

namespace p3::config {
namespace {

CATCH_TEST_CASE("every --set is taken out of argv in order, the rest is kept for absl") {
  std::string a0 = "p3_worker", a1 = "--set=mode=baseline", a2 = "--rank=1",
              a3 = "--set=training.batch_size=8", a4 = "--servers=h:1";
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data()};
  int argc = 5;
  std::vector<std::string> overrides = TakeOverrideFlags(&argc, argv);
  CATCH_CHECK(overrides == std::vector<std::string>{"mode=baseline", "training.batch_size=8"});
  CATCH_REQUIRE(argc == 3);
  CATCH_CHECK(std::string(argv[0]) == "p3_worker");
  CATCH_CHECK(std::string(argv[1]) == "--rank=1");
  CATCH_CHECK(std::string(argv[2]) == "--servers=h:1");
}

CATCH_TEST_CASE("every form of --set is taken out in order and \"--\" ends the flags") {
  std::vector<std::string> words = {"launch_cluster",
                                    "--config=x.textproto",
                                    "--set=training.iterations=5",
                                    "--set",
                                    "cluster.host=::1",
                                    "-set=name=a,b",
                                    "-set",
                                    "name=a b",
                                    "--kill_grace_s=1",
                                    "--",
                                    "--set=after_dashes"};
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  int argc = static_cast<int>(argv.size());
  const std::vector<std::string> sets = TakeOverrideFlags(&argc, argv.data());
  CATCH_CHECK(sets == std::vector<std::string>{"training.iterations=5", "cluster.host=::1",
                                               "name=a,b", "name=a b"});
  std::vector<std::string> rest(argv.begin(), argv.begin() + argc);
  CATCH_CHECK(rest == std::vector<std::string>{"launch_cluster", "--config=x.textproto",
                                               "--kill_grace_s=1", "--", "--set=after_dashes"});
}

}  // namespace
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

}  // namespace p3::config
