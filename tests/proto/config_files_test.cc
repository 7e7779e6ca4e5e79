// Config files: errors name the file, and every config shipped in configs/ loads.
#include "proto/config.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"

namespace p3::config {
namespace {

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

}  // namespace
}  // namespace p3::config
