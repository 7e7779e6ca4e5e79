#include "p3/base/json_file.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"

namespace p3 {
namespace {

std::string TempFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

CATCH_TEST_CASE("a JSON file is read whole into its value") {
  absl::StatusOr<nlohmann::json> object =
      ReadJsonFile(TempFile("object.json", "{\"model\": \"mlp\",\n \"blocks\": [1, 2.5]}\n"));
  CATCH_REQUIRE(object.ok());
  CATCH_CHECK((*object)["model"] == "mlp");
  CATCH_CHECK((*object)["blocks"][1].get<double>() == 2.5);
  // Any JSON value, not only objects: the caller checks the shape it needs.
  absl::StatusOr<nlohmann::json> array = ReadJsonFile(TempFile("array.json", "[3, 4]"));
  CATCH_REQUIRE(array.ok());
  CATCH_CHECK(array->is_array());
  CATCH_CHECK(array->size() == 2);
}

CATCH_TEST_CASE("a missing JSON file is NotFound naming the file") {
  const std::string path = TempFile("present.json", "{}") + ".missing";
  absl::StatusOr<nlohmann::json> read = ReadJsonFile(path);
  CATCH_CHECK(read.status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK(absl::StrContains(read.status().message(), path));
}

CATCH_TEST_CASE("text that is not JSON is refused naming the file, line and column") {
  const std::string path = TempFile("broken.json", "{\"a\": 1,\n  \"b\": }\n");
  absl::StatusOr<nlohmann::json> read = ReadJsonFile(path);
  CATCH_CHECK(read.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(read.status().message());
  CATCH_CAPTURE(message);
  CATCH_CHECK(absl::StartsWith(message, path + ": not valid JSON: parse error at line 2, column 8: "));
  CATCH_CHECK(absl::StrContains(message, "unexpected '}'"));
  CATCH_CHECK_FALSE(absl::StrContains(message, "[json.exception"));
  // Text after the value, and an empty file, are not JSON either.
  CATCH_CHECK(ReadJsonFile(TempFile("trailing.json", "{} x")).status().code() ==
              absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(ReadJsonFile(TempFile("empty.json", "")).status().code() ==
              absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace p3
