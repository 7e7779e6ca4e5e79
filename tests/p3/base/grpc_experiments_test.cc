// RequestGrpcExperiments (p3/base/grpc_experiments.h): sets GRPC_EXPERIMENTS where the
// environment has none, and leaves the user's, even an empty one.
#include "p3/base/grpc_experiments.h"

#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

CATCH_TEST_CASE("grpc experiments: set where the environment has none") {
  unsetenv("GRPC_EXPERIMENTS");
  absl::StatusOr<bool> set = RequestGrpcExperiments(kSizedReadExperiments);
  CATCH_REQUIRE(set.ok());
  CATCH_CHECK(*set);
  CATCH_REQUIRE(std::getenv("GRPC_EXPERIMENTS") != nullptr);
  CATCH_CHECK(std::string(std::getenv("GRPC_EXPERIMENTS")) ==
              "tcp_frame_size_tuning,tcp_rcv_lowat");
  unsetenv("GRPC_EXPERIMENTS");
}

CATCH_TEST_CASE("grpc experiments: the user's own value wins, even an empty one") {
  for (const char* own : {"", "tcp_read_chunks"}) {
    CATCH_INFO("GRPC_EXPERIMENTS=" << own);
    setenv("GRPC_EXPERIMENTS", own, /*overwrite=*/1);
    absl::StatusOr<bool> set = RequestGrpcExperiments(kSizedReadExperiments);
    CATCH_REQUIRE(set.ok());
    CATCH_CHECK(!*set);
    CATCH_CHECK(std::string(std::getenv("GRPC_EXPERIMENTS")) == own);
  }
  unsetenv("GRPC_EXPERIMENTS");
}

}  // namespace
}  // namespace p3
