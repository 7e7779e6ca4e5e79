#include "tools/launcher/tuning.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "p3/core/slice_search.h"
#include "proto/config.h"
#include "tests/testing/temp_dir.h"

namespace p3::tools::launcher {
namespace {

using p3::testing::FreshDir;

config::ExperimentConfig Config(const std::vector<std::string>& overrides) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig("", overrides);
  CATCH_REQUIRE(config.ok());
  return *config;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  CATCH_REQUIRE(out.good());
}

// A small two-block profile for the zoo's "mlp" at the default batch (32).
std::string MlpProfileDir(const std::string& name) {
  const std::string dir = FreshDir(name);
  Write(dir + "/mlp_b32_cpu.json",
        R"({"model": "mlp", "batch": 32, "source": "by hand, for the test",
            "blocks": [{"name": "fc1", "forward_s": 0.001, "backward_s": 0.002,
                        "params": [300000, 1000]},
                       {"name": "fc2", "forward_s": 0.001, "backward_s": 0.002,
                        "params": [100000, 10]}]})");
  return dir;
}

std::string Lines(const TuningReport& report) { return absl::StrJoin(TuningLogLines(report), "\n"); }

CATCH_TEST_CASE("the profile: the model's at the batch, else at the nearest batch, by image size") {
  const std::string dir = FreshDir("profiles");
  for (const char* name : {"m_b8_cpu.json", "m_b16_cpu.json", "m_b2_i224_cpu.json",
                           "other_b8_cpu.json", "m_bx_cpu.json", "m_b4_gpu.json"}) {
    Write(dir + "/" + name, "{}");
  }
  CATCH_CHECK(FindProfile(dir, "m", 8, 0) == dir + "/m_b8_cpu.json");
  CATCH_CHECK(FindProfile(dir, "m", 16, 32) == dir + "/m_b16_cpu.json");
  CATCH_CHECK(FindProfile(dir, "m", 15, 0) == dir + "/m_b16_cpu.json");
  CATCH_CHECK(FindProfile(dir, "m", 12, 0) == dir + "/m_b8_cpu.json");  // a tie: the smaller
  CATCH_CHECK(FindProfile(dir, "m", 1, 0) == dir + "/m_b8_cpu.json");   // not the 224 one
  CATCH_CHECK(FindProfile(dir, "m", 2, 224) == dir + "/m_b2_i224_cpu.json");
  CATCH_CHECK(FindProfile(dir, "m", 8, 224) == dir + "/m_b2_i224_cpu.json");
  CATCH_CHECK(FindProfile(dir, "m", 8, 64).empty());
  CATCH_CHECK(FindProfile(dir, "x", 8, 0).empty());
  CATCH_CHECK(FindProfile(dir + "/missing", "m", 8, 0).empty());
}

CATCH_TEST_CASE("nothing automatic: no search, the config's values, nothing printed") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("fixed");
  const config::ExperimentConfig config =
      Config({"model.name=mlp", "scheduling.slice_params=123", "scheduling.credit_bytes=7"});
  CATCH_CHECK(!NeedsTuning(config));
  const TuningReport report = TuneConfig(config, options);
  CATCH_CHECK(!report.searched);
  CATCH_CHECK(report.slice_params == 123);
  CATCH_CHECK(report.credit_bytes == 7);
  CATCH_CHECK(TuningLogLines(report).empty());
  CATCH_CHECK(TuningOverrides(report).empty());
}

CATCH_TEST_CASE("slice_params 0: the grid is simulated and the best point given to every process") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("search");
  options.cpu_cores_per_host = 2;
  options.iterations = 4;
  options.warmup_iterations = 1;
  const config::ExperimentConfig config =
      Config({"model.name=mlp", "scheduling.slice_params=0", "network.bandwidth_gbps=1"});
  CATCH_CHECK(NeedsTuning(config));
  const TuningReport report = TuneConfig(config, options);
  CATCH_REQUIRE(report.searched);
  CATCH_CHECK(report.reason.empty());
  CATCH_REQUIRE(report.choice.has_value());
  CATCH_REQUIRE(report.choice->candidates.size() == 8);
  for (const sim::TuningCandidate& c : report.choice->candidates) CATCH_CHECK(c.ok);
  const sim::TuningCandidate& chosen = report.choice->candidates[report.choice->chosen];
  CATCH_CHECK(report.slice_params == chosen.point.slice_params);
  CATCH_CHECK(report.slice_params > 0);
  CATCH_CHECK(report.credit_bytes == 0);
  CATCH_CHECK(report.profile == options.profile_dir + "/mlp_b32_cpu.json");
  CATCH_CHECK(report.machines_per_host == 2);
  CATCH_CHECK(report.calibration == "built-in");

  // An epoch-long run: the online search is on as well.
  CATCH_REQUIRE(TuningOverrides(report).size() == 2);
  CATCH_CHECK(TuningOverrides(report)[0] ==
              "scheduling.slice_params=" + std::to_string(report.slice_params));
  CATCH_CHECK(TuningOverrides(report)[1] == "scheduling.online_search=true");
  const std::string lines = Lines(report);
  CATCH_CHECK(absl::StrContains(lines, "automatic scheduling.slice_params: 8 points simulated"));
  CATCH_CHECK(absl::StrContains(lines, "<- chosen"));
  CATCH_CHECK(absl::StrContains(
      lines, "chosen: slice_params " + std::to_string(report.slice_params) + ", credit_bytes 0"));

  const nlohmann::ordered_json json = TuningJson(report);
  CATCH_CHECK(json["searched"] == true);
  CATCH_CHECK(json["slice_params"] == report.slice_params);
  CATCH_CHECK(json["grid"].size() == 8);
  CATCH_CHECK(json["grid"][0]["slice_params"] == 10000);
  CATCH_CHECK(json["predicted_samples_per_second"] == chosen.samples_per_second);
  CATCH_CHECK(json["profile_source"] == "by hand, for the test");
  CATCH_CHECK(json["tie_tolerance"] == sim::kTuningTieTolerance);

  // Pure: the same config and options choose the same.
  CATCH_CHECK(TuneConfig(config, options).slice_params == report.slice_params);
}

CATCH_TEST_CASE("slice_params absent: the grid chooses as with 0, and the online search stays off") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("absent");
  options.cpu_cores_per_host = 2;
  options.iterations = 4;
  options.warmup_iterations = 1;
  // An epoch-long run (no training.iterations): with 0 the online search would be on.
  const config::ExperimentConfig absent =
      Config({"model.name=mlp", "network.bandwidth_gbps=1"});
  CATCH_REQUIRE(!absent.scheduling().has_slice_params());
  CATCH_CHECK(NeedsTuning(absent));
  const TuningReport report = TuneConfig(absent, options);
  CATCH_REQUIRE(report.searched);
  CATCH_CHECK(report.slice_auto);
  CATCH_CHECK(report.slice_absent);
  CATCH_REQUIRE(report.choice.has_value());
  CATCH_CHECK(report.choice->candidates.size() == 8);
  // The same choice as an explicit 0 ...
  const TuningReport zero =
      TuneConfig(Config({"model.name=mlp", "network.bandwidth_gbps=1", "scheduling.slice_params=0"}),
                 options);
  CATCH_CHECK(report.slice_params == zero.slice_params);
  CATCH_CHECK(zero.online_search);
  // ... but no re-plans during the run: only the size is given to every process.
  CATCH_CHECK(!report.online_search);
  CATCH_CHECK(report.online_reason.empty());
  CATCH_CHECK(TuningOverrides(report) ==
              std::vector<std::string>{"scheduling.slice_params=" +
                                       std::to_string(report.slice_params)});
  const std::string lines = Lines(report);
  CATCH_CHECK(absl::StrContains(
      lines, "automatic scheduling.slice_params (absent: the default): 8 points simulated"));
  CATCH_CHECK(!absl::StrContains(lines, "online search"));
  CATCH_CHECK(TuningJson(report)["slice_params_absent"] == true);
  CATCH_CHECK(TuningJson(zero)["slice_params_absent"] == false);
  CATCH_CHECK(!TuningJson(report).contains("online_search"));
  // online_search: true in the config still turns it on.
  CATCH_CHECK(TuneConfig(Config({"model.name=mlp", "network.bandwidth_gbps=1",
                                 "scheduling.online_search=true"}),
                         options)
                  .online_search);
}

CATCH_TEST_CASE("slice_params absent, no profile: 40000, said in one line; explicit N stays N") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("absent_no_profile");
  // small_cnn: no profile in this folder (a user's own model is the same case).
  const TuningReport report = TuneConfig(Config({}), options);
  CATCH_CHECK(!report.searched);
  CATCH_CHECK(report.slice_params == 40000);
  CATCH_CHECK(!report.online_search);
  const std::vector<std::string> lines = TuningLogLines(report);
  CATCH_REQUIRE(lines.size() == 1);
  CATCH_CHECK(lines[0] ==
              "automatic scheduling.slice_params (absent: the default): not searched (no "
              "simulator profile for model \"small_cnn\" in " + options.profile_dir +
              " (small_cnn_b<batch>_cpu.json; docs/simulator.md, \"Profile files\")); the "
              "defaults: slice_params 40000, credit_bytes 0");
  CATCH_CHECK(TuningOverrides(report) ==
              std::vector<std::string>{"scheduling.slice_params=40000"});

  // The user's own worker program: model.name's profile is not its model's.
  options.iterations = 4;
  options.warmup_iterations = 1;
  const TuningReport own =
      TuneConfig(Config({"model.name=mlp", "worker.command=python3 train.py"}), options);
  CATCH_CHECK(!own.searched);
  CATCH_CHECK(own.slice_params == 40000);
  CATCH_REQUIRE(TuningLogLines(own).size() == 1);
  CATCH_CHECK(absl::StrContains(TuningLogLines(own)[0],
                                "not searched (worker.command runs your own program"));
  CATCH_CHECK(TuningOverrides(own) == std::vector<std::string>{"scheduling.slice_params=40000"});
  // An explicit 0 predicts with model.name's profile, as it did.
  CATCH_CHECK(TuneConfig(Config({"model.name=mlp", "worker.command=python3 train.py",
                                 "scheduling.slice_params=0"}),
                         options)
                  .searched);

  // Explicit sizes, 40000 included, are not automatic: nothing searched or printed.
  for (const char* n : {"40000", "123"}) {
    const TuningReport fixed =
        TuneConfig(Config({"model.name=mlp", std::string("scheduling.slice_params=") + n}),
                   options);
    CATCH_CHECK(!fixed.slice_auto);
    CATCH_CHECK(!fixed.searched);
    CATCH_CHECK(std::to_string(fixed.slice_params) == n);
    CATCH_CHECK(TuningLogLines(fixed).empty());
    CATCH_CHECK(TuningOverrides(fixed).empty());
  }
}

CATCH_TEST_CASE("slice_params absent where the size means nothing: nothing searched or printed") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("absent_no_slices");
  for (const char* mode : {"local", "baseline", "priority_only"}) {
    CATCH_CAPTURE(mode);
    const TuningReport report =
        TuneConfig(Config({"model.name=mlp", std::string("mode=") + mode}), options);
    CATCH_CHECK(!report.slice_auto);
    CATCH_CHECK(!report.searched);
    CATCH_CHECK(report.slice_params == 40000);
    CATCH_CHECK(TuningLogLines(report).empty());
    CATCH_CHECK(TuningOverrides(report).empty());
  }
  // With credit_bytes -1 the credit is still searched (baseline), without the slice size.
  options.iterations = 4;
  options.warmup_iterations = 1;
  const TuningReport credit = TuneConfig(
      Config({"model.name=mlp", "mode=baseline", "scheduling.credit_bytes=-1"}), options);
  CATCH_CHECK(credit.searched);
  CATCH_CHECK(!credit.slice_auto);
  CATCH_CHECK(credit.choice->candidates.size() == 4);
  for (const std::string& o : TuningOverrides(credit)) {
    CATCH_CHECK(!absl::StrContains(o, "slice_params"));
  }
}

CATCH_TEST_CASE("the search simulates the config's wire dtype: a bfloat16 wire's points are faster") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("search_wire");
  options.iterations = 4;
  options.warmup_iterations = 1;
  const std::vector<std::string> base = {"model.name=mlp", "scheduling.slice_params=0",
                                         "network.bandwidth_gbps=1"};
  const TuningReport f32 = TuneConfig(Config(base), options);
  std::vector<std::string> wire = base;
  wire.push_back("scheduling.wire_dtype=bfloat16");
  const TuningReport bf16 = TuneConfig(Config(wire), options);
  CATCH_REQUIRE(f32.choice.has_value());
  CATCH_REQUIRE(bf16.choice.has_value());
  CATCH_REQUIRE(f32.choice->candidates.size() == bf16.choice->candidates.size());
  // The link is the limit (no core limit here): half the bytes, far more samples/s at
  // every slice size.
  for (size_t i = 0; i < f32.choice->candidates.size(); ++i) {
    CATCH_CHECK(bf16.choice->candidates[i].samples_per_second >
                1.3 * f32.choice->candidates[i].samples_per_second);
  }
}

CATCH_TEST_CASE("the online search follows the grid unless the run rules it out, saying why") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("online");
  options.cpu_cores_per_host = 2;
  options.iterations = 4;
  options.warmup_iterations = 1;
  const std::vector<std::string> base = {"model.name=mlp", "scheduling.slice_params=0",
                                         "network.bandwidth_gbps=1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> all = base;
    all.insert(all.end(), more.begin(), more.end());
    return TuneConfig(Config(all), options);
  };
  // 200 iterations: on, from the grid's choice, with stripes of 4x it.
  const TuningReport on = with({"training.iterations=200"});
  CATCH_REQUIRE(on.online_search);
  CATCH_CHECK(on.online_reason.empty());
  CATCH_CHECK(on.owner_params == SliceSearchOwnerParams(on.slice_params));
  CATCH_CHECK(on.online_candidates == SliceSearchCandidates(on.slice_params, on.owner_params));
  CATCH_CHECK(on.online_iterations <= 20);
  CATCH_CHECK(absl::StrContains(Lines(on), "online search: on; worker 0 times slice sizes"));
  const nlohmann::ordered_json json = TuningJson(on);
  CATCH_CHECK(json["online_search"]["enabled"] == true);
  CATCH_CHECK(json["online_search"]["owner_params"] == on.owner_params);
  CATCH_CHECK(json["online_search"]["iterations_needed"] == on.online_iterations);

  // Off, each with its reason, and no override.
  const std::vector<std::pair<std::vector<std::string>, std::string>> off = {
      {{"training.iterations=100"}, "the run has 100 iterations; the search takes"},
      {{"training.iterations=200", "scheduling.wire_dtype=float16"}, "float16"},
      {{"training.iterations=200", "mode=slicing_only"}, "no slices returned with their values"},
      {{"training.iterations=200", "scheduling.online_search=false"}, "false in the config"},
  };
  for (const auto& [more, reason] : off) {
    CATCH_CAPTURE(absl::StrJoin(more, " "));
    const TuningReport r = with(more);
    CATCH_CHECK(!r.online_search);
    CATCH_CHECK(absl::StrContains(r.online_reason, reason));
    CATCH_CHECK(absl::StrContains(Lines(r), "online search: off (" + r.online_reason + ")"));
    for (const std::string& o : TuningOverrides(r)) CATCH_CHECK(!absl::StrContains(o, "online"));
    CATCH_CHECK(TuningJson(r)["online_search"]["enabled"] == false);
  }
  // Checkpoints no longer rule it out: a checkpoint records the plan it was taken under.
  const TuningReport checkpointed =
      with({"training.iterations=200", "checkpoint.every=10", "checkpoint.dir=/tmp/x"});
  CATCH_CHECK(checkpointed.online_search);
  CATCH_CHECK(checkpointed.online_reason.empty());
  // Set in the config: kept, and not overridden again.
  const TuningReport set = with({"training.iterations=20", "scheduling.online_search=true"});
  CATCH_CHECK(set.online_search);
  CATCH_CHECK(set.online_search_in_config);
  for (const std::string& o : TuningOverrides(set)) CATCH_CHECK(!absl::StrContains(o, "online"));
}

CATCH_TEST_CASE("credit_bytes -1 alone searches the credits at the config's slice size") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("credit");
  options.iterations = 4;
  options.warmup_iterations = 1;
  // Separate placement: each worker has two remote servers, so the credit can matter.
  const config::ExperimentConfig config =
      Config({"model.name=mlp", "scheduling.credit_bytes=-1", "scheduling.slice_params=20000",
              "network.bandwidth_gbps=1", "network.placement=separate"});
  const TuningReport report = TuneConfig(config, options);
  CATCH_REQUIRE(report.searched);
  CATCH_REQUIRE(report.choice->candidates.size() == 4);
  for (const sim::TuningCandidate& c : report.choice->candidates) {
    CATCH_CHECK(c.point.slice_params == 20000);
  }
  CATCH_CHECK(report.slice_params == 20000);
  CATCH_REQUIRE(TuningOverrides(report).size() == 1);
  CATCH_CHECK(absl::StartsWith(TuningOverrides(report)[0], "scheduling.credit_bytes="));
}

CATCH_TEST_CASE("without a prediction the defaults are kept, and the reason says why") {
  TuningOptions options;
  options.profile_dir = MlpProfileDir("fallbacks");

  // A model without a profile.
  TuningReport report = TuneConfig(
      Config({"scheduling.slice_params=0", "scheduling.credit_bytes=-1"}), options);
  CATCH_CHECK(!report.searched);
  CATCH_CHECK(report.slice_params == 40000);
  CATCH_CHECK(report.credit_bytes == 0);
  CATCH_CHECK(absl::StrContains(report.reason, "no simulator profile for model \"small_cnn\""));
  CATCH_CHECK(absl::StrContains(Lines(report), "not searched (no simulator profile"));
  CATCH_CHECK(absl::StrContains(Lines(report), "the defaults: slice_params 40000, credit_bytes 0"));
  // The online search needs no prediction: it starts from the default.
  std::vector<std::string> overrides = TuningOverrides(report);
  CATCH_CHECK(overrides == std::vector<std::string>{"scheduling.slice_params=40000",
                                                    "scheduling.credit_bytes=0",
                                                    "scheduling.online_search=true"});
  CATCH_CHECK(report.online_candidates == std::vector<int64_t>{40000, 80000, 160000, 20000});
  nlohmann::ordered_json json = TuningJson(report);
  CATCH_CHECK(json["searched"] == false);
  CATCH_CHECK(!json.contains("grid"));

  // Mode local: no communication.
  report = TuneConfig(Config({"model.name=mlp", "mode=local", "scheduling.slice_params=0"}),
                      options);
  CATCH_CHECK(!report.searched);
  CATCH_CHECK(absl::StrContains(report.reason, "has no communication"));

  // A mode that sends whole tensors: the slice size means nothing ...
  report = TuneConfig(Config({"model.name=mlp", "mode=baseline", "scheduling.slice_params=0"}),
                      options);
  CATCH_CHECK(!report.searched);
  CATCH_CHECK(report.slice_params == 40000);
  CATCH_CHECK(absl::StrContains(report.reason, "sends whole tensors"));
  // ... but its credit is still searched, with the note.
  options.iterations = 4;
  options.warmup_iterations = 1;
  report = TuneConfig(Config({"model.name=mlp", "mode=baseline", "scheduling.slice_params=0",
                              "scheduling.credit_bytes=-1"}),
                      options);
  CATCH_CHECK(report.searched);
  CATCH_CHECK(report.choice->candidates.size() == 4);
  CATCH_CHECK(report.slice_params == 40000);
  CATCH_CHECK(absl::StrContains(Lines(report), "note: mode \"baseline\" sends whole tensors"));

  // Processes on other hosts: their link rate is unknown.
  options.other_hosts = true;
  report = TuneConfig(Config({"model.name=mlp", "scheduling.slice_params=0"}), options);
  CATCH_CHECK(!report.searched);
  CATCH_CHECK(absl::StrContains(report.reason, "other hosts"));
  options.other_hosts = false;

  // A broken profile.
  Write(options.profile_dir + "/mlp_b32_cpu.json", "not json");
  report = TuneConfig(Config({"model.name=mlp", "scheduling.slice_params=0"}), options);
  CATCH_CHECK(!report.searched);
  CATCH_CHECK(report.slice_params == 40000);
  CATCH_CHECK(!report.reason.empty());
}

}  // namespace
}  // namespace p3::tools::launcher
