#include "proto/program.h"

#include <catch2/catch.hpp>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "p3/base/file_util.h"
#include "tests/testing/temp_dir.h"

ABSL_FLAG(std::string, program_test_config, "", "a config path, as a main's --config");
ABSL_FLAG(int, program_test_rank, 0, "an integer flag");

namespace p3 {
namespace {

// argv as a main gets it: mutable strings that outlive the Program.
class Argv {
 public:
  explicit Argv(std::vector<std::string> args) : args_(std::move(args)) {
    for (std::string& a : args_) pointers_.push_back(a.data());
    pointers_.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(args_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<char*> pointers_;
};

// What `body` prints on std::cerr.
template <typename F>
std::string CaptureStderr(F body) {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  body();
  std::cerr.rdbuf(old);
  return captured.str();
}

CATCH_TEST_CASE("a program takes the --set overrides out before parsing the flags") {
  Argv args({"prog", "--set=training.batch_size=64", "--program_test_rank=3", "--set",
             "mode=baseline", "in.json", "-set=name=x"});
  Program program("prog", args.argc(), args.argv(), {.config_overrides = true});
  CATCH_CHECK(program.overrides() ==
              std::vector<std::string>{"training.batch_size=64", "mode=baseline", "name=x"});
  CATCH_CHECK(absl::GetFlag(FLAGS_program_test_rank) == 3);
  CATCH_CHECK(program.arguments() == std::vector<std::string>{"in.json"});
}

CATCH_TEST_CASE("a program without overrides takes none and parses its flags") {
  Argv args({"prog", "--program_test_rank=5"});
  Program program("prog", args.argc(), args.argv());
  CATCH_CHECK(program.overrides().empty());
  CATCH_CHECK(program.arguments().empty());
  CATCH_CHECK(absl::GetFlag(FLAGS_program_test_rank) == 5);
  CATCH_CHECK(program.NoArguments().ok());
}

CATCH_TEST_CASE("an argument that is not a flag is refused by name, with --set as the way") {
  Argv with_set({"launch", "training.batch_size=64"});
  Program launcher("launch", with_set.argc(), with_set.argv(), {.config_overrides = true});
  const absl::Status refused = launcher.NoArguments();
  CATCH_CHECK(absl::IsInvalidArgument(refused));
  CATCH_CHECK(refused.message() ==
              "unexpected argument \"training.batch_size=64\"; config fields are set with "
              "--set=field.path=value");

  Argv plain({"bench", "extra"});
  Program bench("bench", plain.argc(), plain.argv());
  CATCH_CHECK(bench.NoArguments().message() == "unexpected argument \"extra\"");
}

CATCH_TEST_CASE("the config is loaded with the overrides of the command line") {
  const std::string dir = testing::FreshDir("program_config");
  const std::string path = dir + "/x.textproto";
  CATCH_REQUIRE(WriteFileAtomically(path, "name: \"x\"\ntraining { batch_size: 8 }\n").ok());
  Argv args({"prog", "--program_test_config=" + path, "--set=training.batch_size=64"});
  Program program("prog", args.argc(), args.argv(), {.config_overrides = true});
  absl::StatusOr<config::ExperimentConfig> config =
      program.LoadConfig(absl::GetFlag(FLAGS_program_test_config));
  CATCH_REQUIRE(config.ok());
  CATCH_CHECK(config->name() == "x");
  CATCH_CHECK(config->training().batch_size() == 64);
  CATCH_CHECK(config->cluster().workers() == 2);  // defaults filled
}

CATCH_TEST_CASE("a missing --config is named as the flag, a bad one by its path") {
  Argv args({"prog"});
  Program program("prog", args.argc(), args.argv(), {.config_overrides = true});
  const absl::StatusOr<config::ExperimentConfig> none = program.LoadConfig("");
  CATCH_CHECK(absl::IsInvalidArgument(none.status()));
  CATCH_CHECK(none.status().message() == "--config=PATH is required");
  const std::string missing = testing::FreshDir("program_missing") + "/none.textproto";
  const absl::StatusOr<config::ExperimentConfig> absent = program.LoadConfig(missing);
  CATCH_CHECK(absl::IsNotFound(absent.status()));
  CATCH_CHECK(absent.status().message().find(missing) == 0);
}

CATCH_TEST_CASE("Fail prints the program's name and the reason, and returns the exit code") {
  Argv args({"p3_server"});
  Program program("p3_server", args.argc(), args.argv());
  int code = 0;
  std::string printed = CaptureStderr([&] { code = program.Fail(2, "bad config"); });
  CATCH_CHECK(code == 2);
  CATCH_CHECK(printed == "p3_server: bad config\n");
  program.set_name("p3_server 1");
  printed = CaptureStderr([&] { program.Warn("checkpoint failed"); });
  CATCH_CHECK(printed == "p3_server 1: checkpoint failed\n");
  CATCH_CHECK(program.name() == "p3_server 1");
}

CATCH_TEST_CASE("a requested file is written whole; without a path nothing is written") {
  const std::string dir = testing::FreshDir("program_requested");
  CATCH_CHECK(WriteRequestedFile("", "ignored").ok());
  CATCH_REQUIRE(WriteRequestedFile(dir + "/result.json", "{}\n").ok());
  CATCH_CHECK(ReadFile(dir + "/result.json").value() == "{}\n");
  CATCH_CHECK(!WriteRequestedFile(dir + "/no_such_folder/result.json", "{}").ok());
}

}  // namespace
}  // namespace p3
