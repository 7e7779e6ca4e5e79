#include "p3/sim/profile.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace p3::sim {
namespace {

std::string ProfileFile(const std::string& name, const std::string& contents) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

CATCH_TEST_CASE("a profile file gives its blocks, times and tensors in forward order") {
  absl::StatusOr<Profile> profile = LoadProfile(ProfileFile(
      "two_blocks.json",
      "{\"model\": \"m\", \"batch\": 8, \"source\": \"by hand\", \"blocks\": ["
      "{\"name\": \"fc1\", \"forward_s\": 0.5, \"backward_s\": 1, \"params\": [6, 3]},"
      "{\"forward_s\": 0.25, \"backward_s\": 0.5}]}"));
  CATCH_REQUIRE(profile.ok());
  CATCH_CHECK(profile->model == "m");
  CATCH_CHECK(profile->batch == 8);
  CATCH_CHECK(profile->source == "by hand");
  CATCH_REQUIRE(profile->blocks.size() == 2);
  CATCH_CHECK(profile->blocks[0].forward_s == 0.5);
  CATCH_CHECK(profile->blocks[1].name == "block1");  // unnamed: by its index
  CATCH_CHECK(profile->blocks[1].backward_s == 0.5);
  const std::vector<TensorEntry> tensors = ProfileTensors(*profile);
  CATCH_REQUIRE(tensors.size() == 2);
  CATCH_CHECK(tensors[0].name == "fc1/0");
  CATCH_CHECK(tensors[0].numel == 6);
  CATCH_CHECK(tensors[1].name == "fc1/1");
  CATCH_CHECK(tensors[1].numel == 3);
}

CATCH_TEST_CASE("a profile that cannot be read or is not JSON is refused naming the file") {
  const std::string missing = ProfileFile("present.json", "{}") + ".missing";
  absl::StatusOr<Profile> profile = LoadProfile(missing);
  CATCH_CHECK(profile.status().code() == absl::StatusCode::kNotFound);
  CATCH_CHECK(absl::StrContains(profile.status().message(), missing));
  const std::string broken = ProfileFile("broken.json", "{\"batch\": 8,\n \"blocks\": [}");
  profile = LoadProfile(broken);
  CATCH_CHECK(profile.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(absl::StartsWith(profile.status().message(),
                               broken + ": not valid JSON: parse error at line 2, column 13"));
  const std::string array = ProfileFile("array.json", "[]");
  CATCH_CHECK(LoadProfile(array).status().message() == array + ": not a JSON object");
}

CATCH_TEST_CASE("a profile with a bad field is refused naming the field") {
  auto error_of = [](const std::string& contents) {
    return std::string(LoadProfile(ProfileFile("bad.json", contents)).status().message());
  };
  CATCH_CHECK(absl::StrContains(error_of("{\"batch\": 0, \"blocks\": [{}]}"), "batch must be >= 1"));
  CATCH_CHECK(absl::StrContains(error_of("{\"batch\": 1, \"blocks\": []}"),
                                "\"blocks\" must be a non-empty array"));
  CATCH_CHECK(absl::StrContains(error_of("{\"batch\": 1, \"blocks\": [{\"forward_s\": 1}]}"),
                                "block 0 needs numbers forward_s, backward_s"));
  CATCH_CHECK(absl::StrContains(
      error_of("{\"batch\": 1, \"blocks\": [{\"name\": \"b\", \"forward_s\": -1, "
               "\"backward_s\": 1}]}"),
      "block b has a negative time"));
  CATCH_CHECK(absl::StrContains(
      error_of("{\"batch\": 1, \"blocks\": [{\"name\": \"b\", \"forward_s\": 1, "
               "\"backward_s\": 1, \"params\": [0]}]}"),
      "params of b must be sizes >= 1"));
}

CATCH_TEST_CASE("an output block cut into pieces: rows as the model cuts them, times by rows") {
  Profile profile;
  profile.blocks = {{"embed", 0.1, 0.2, {40}}, {"output", 1.0, 2.0, {10 * 4, 10}}};
  absl::StatusOr<Profile> cut = CutOutputBlock(profile, 3);
  CATCH_REQUIRE(cut.ok());
  CATCH_REQUIRE(cut->blocks.size() == 4);
  CATCH_CHECK(cut->blocks[0].name == "embed");
  // 10 rows: 4, 3, 3, as models/output_pieces.h.
  CATCH_CHECK(cut->blocks[1].name == "output.0");
  CATCH_CHECK(cut->blocks[1].params == std::vector<int64_t>{16, 4});
  CATCH_CHECK(cut->blocks[3].name == "output.2");
  CATCH_CHECK(cut->blocks[3].params == std::vector<int64_t>{12, 3});
  CATCH_CHECK(cut->blocks[1].forward_s == Approx(0.4));
  CATCH_CHECK(cut->blocks[2].backward_s == Approx(0.6));
  CATCH_CHECK(CutOutputBlock(profile, 1)->blocks.size() == 2);
  CATCH_CHECK(!CutOutputBlock(profile, 11).ok());
  profile.blocks.back().params = {40};  // no bias: not an output projection
  CATCH_CHECK(absl::StrContains(CutOutputBlock(profile, 2).status().message(),
                                "not an output projection"));
}

}  // namespace
}  // namespace p3::sim
