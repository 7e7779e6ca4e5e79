#include "p3/base/file_util.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace p3 {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

CATCH_TEST_CASE("an atomic write replaces the file whole and leaves no temporary") {
  const std::string path = TempDir() + "/atomic.txt";
  CATCH_REQUIRE(WriteFileAtomically(path, "first version, longer than the second").ok());
  CATCH_REQUIRE(WriteFileAtomically(path, std::string("second\0binary", 13)).ok());
  absl::StatusOr<std::string> read = ReadFile(path);
  CATCH_REQUIRE(read.ok());
  CATCH_CHECK(*read == std::string("second\0binary", 13));
  CATCH_CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

CATCH_TEST_CASE("an atomic write into a missing folder fails naming the file") {
  const std::string path = TempDir() + "/no/such/folder/x.json";
  const absl::Status s = WriteFileAtomically(path, "x");
  CATCH_CHECK(s.code() == absl::StatusCode::kInternal);
  CATCH_CHECK(std::string(s.message()).find(path) != std::string::npos);
  CATCH_CHECK(WriteFileAtomically("", "x").code() == absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE("a durable atomic write gives the same file and leaves no temporary") {
  const std::string path = TempDir() + "/durable.bin";
  CATCH_REQUIRE(WriteFileAtomically(path, "old", {.sync = true}).ok());
  CATCH_REQUIRE(WriteFileAtomically(path, std::string("new\0bytes", 9), {.sync = true}).ok());
  absl::StatusOr<std::string> read = ReadFile(path);
  CATCH_REQUIRE(read.ok());
  CATCH_CHECK(*read == std::string("new\0bytes", 9));
  CATCH_CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  const absl::Status missing =
      WriteFileAtomically(TempDir() + "/no/such/folder/y.bin", "x", {.sync = true});
  CATCH_CHECK(missing.code() == absl::StatusCode::kInternal);
}

CATCH_TEST_CASE("reading a missing file is NotFound naming the file") {
  absl::StatusOr<std::string> read = ReadFile(TempDir() + "/missing.txt");
  CATCH_REQUIRE_FALSE(read.ok());
  CATCH_CHECK(read.status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK(std::string(read.status().message()).find("missing.txt") != std::string::npos);
}

CATCH_TEST_CASE("an output folder is made with its parents, or made anew in /tmp when none is given") {
  const std::string nested = TempDir() + "/out/a/b";
  absl::StatusOr<std::string> made = OutputFolder(nested, "unused");
  CATCH_REQUIRE(made.ok());
  CATCH_CHECK(*made == nested);
  CATCH_CHECK(std::filesystem::is_directory(nested));
  CATCH_CHECK(OutputFolder(nested, "unused").ok());  // already there
  absl::StatusOr<std::string> fresh = OutputFolder("", "p3_file_util_test");
  absl::StatusOr<std::string> other = OutputFolder("", "p3_file_util_test");
  CATCH_REQUIRE(fresh.ok());
  CATCH_REQUIRE(other.ok());
  CATCH_CHECK(fresh->rfind("/tmp/p3_file_util_test.", 0) == 0);
  CATCH_CHECK(*fresh != *other);
  CATCH_CHECK(std::filesystem::is_directory(*fresh));
  std::filesystem::remove(*fresh);
  std::filesystem::remove(*other);
  // Below a file: no folder can be made there.
  CATCH_REQUIRE(WriteFileAtomically(TempDir() + "/a_file", "x").ok());
  const absl::StatusOr<std::string> refused = OutputFolder(TempDir() + "/a_file/sub", "unused");
  CATCH_REQUIRE_FALSE(refused.ok());
  CATCH_CHECK(refused.status().code() == absl::StatusCode::kInternal);
  CATCH_CHECK(std::string(refused.status().message()).find("a_file/sub") != std::string::npos);
}

}  // namespace
}  // namespace p3
