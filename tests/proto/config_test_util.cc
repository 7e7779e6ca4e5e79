#include "tests/proto/config_test_util.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/config.h"

namespace p3::config {

std::string ErrorOf(const std::string& text, const std::vector<std::string>& overrides) {
  absl::StatusOr<ExperimentConfig> config = ParseConfig(text, overrides);
  if (config.ok()) return "(no error)";
  CATCH_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

}  // namespace p3::config
