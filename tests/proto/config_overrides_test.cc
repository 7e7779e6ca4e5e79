// --set overrides: applied in order on top of the file, validated like it, with errors
// naming the override; and taken out of a command line before absl parses its flags.
#include "proto/config.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "tests/proto/config_test_util.h"

namespace p3::config {
namespace {

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
}  // namespace p3::config
