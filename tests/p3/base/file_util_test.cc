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

}  // namespace
}  // namespace p3
