// Re-plans during a cluster run (RequestReplan): bit for bit what one plan trains, and
// equal to local; Adam's moments and a bfloat16 wire kept; a re-plan the run cannot take
// refused with the reason.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "p3/core/mode.h"
#include "p3/core/wire_dtype.h"
#include "tests/cluster/cluster_fixture.h"

namespace p3::cluster_test {
namespace {

CATCH_TEST_CASE("re-plans during a run train bit for bit what one plan trains, and equal local") {
  torch::set_num_threads(1);
  // Slices of 50 in stripes of 100; before iteration 1 rank 0 asks for 20 (from iteration
  // 2), before iteration 3 for 100 (from iteration 4).
  const std::vector<std::pair<int64_t, int64_t>> replans = {{1, 20}, {3, 100}};
  const torch::Tensor want = TrainLocal(2, ScheduledSgd());
  for (Mode mode : {Mode::kP3, Mode::kNoOverlap, Mode::kNoBackwardOverlap,
                    Mode::kNoForwardOverlap}) {
    for (int servers : {1, 2}) {
      for (bool shared : {true, false}) {
        CATCH_CAPTURE(ModeName(mode), servers, shared);
        RunSpec spec{.mode = mode, .workers = 2, .servers = servers, .steps = 6,
                     .shared_memory = shared, .optimizer = ScheduledSgd(), .owner_params = 100};
        ClusterResult fixed = TrainCluster(spec);
        spec.replans = replans;
        ClusterResult replanned = TrainCluster(spec);
        for (int r = 0; r < 2; ++r) {
          CATCH_CAPTURE(replanned.status[0].ToString(), replanned.status[1].ToString());
          CATCH_CAPTURE(r, fixed.status[r].ToString(), replanned.status[r].ToString());
          CATCH_REQUIRE(fixed.status[r].ok());
          CATCH_REQUIRE(replanned.status[r].ok());
          CATCH_CHECK(replanned.replans[r] == 2);
          CATCH_CHECK(replanned.final_slice_params[r] == 100);
          CATCH_CHECK(fixed.replans[r] == 0);
          CATCH_CHECK(torch::equal(replanned.params[r], fixed.params[r]));
        }
      }
    }
  }
  // The first 4 iterations, one re-plan among them, against local.
  ClusterResult short_run = TrainCluster(RunSpec{.mode = Mode::kP3, .workers = 2, .servers = 2,
                                                 .optimizer = ScheduledSgd(), .owner_params = 100,
                                                 .replans = {{1, 20}}});
  for (int r = 0; r < 2; ++r) {
    CATCH_CAPTURE(r, short_run.status[r].ToString());
    CATCH_REQUIRE(short_run.status[r].ok());
    CATCH_CHECK(short_run.replans[r] == 1);
    CATCH_CHECK(RelativeError(short_run.params[r], want) <= 1e-5);
  }
}

CATCH_TEST_CASE("re-plans keep Adam's moments and a bfloat16 wire bit for bit") {
  torch::set_num_threads(1);
  for (WireDType dtype : {WireDType::kFloat32, WireDType::kBFloat16}) {
    CATCH_CAPTURE(WireDTypeName(dtype));
    RunSpec spec{.mode = Mode::kP3, .workers = 3, .servers = 2, .steps = 6,
                 .optimizer = ScheduledAdam(), .wire_dtype = dtype, .owner_params = 100};
    ClusterResult fixed = TrainCluster(spec);
    spec.replans = {{1, 100}, {3, 7}};
    ClusterResult replanned = TrainCluster(spec);
    for (int r = 0; r < 3; ++r) {
      CATCH_CAPTURE(replanned.status[1].ToString(), replanned.status[2].ToString());
      CATCH_CAPTURE(r, fixed.status[r].ToString(), replanned.status[r].ToString());
      CATCH_REQUIRE(fixed.status[r].ok());
      CATCH_REQUIRE(replanned.status[r].ok());
      CATCH_CHECK(replanned.final_slice_params[r] == 7);
      CATCH_CHECK(torch::equal(replanned.params[r], fixed.params[r]));
    }
  }
}

CATCH_TEST_CASE("a re-plan the run cannot take is refused with the reason named") {
  torch::set_num_threads(1);
  // Without ownership stripes, and in a mode that pulls: refused by the worker.
  ClusterResult no_stripes = TrainCluster(
      RunSpec{.mode = Mode::kP3, .workers = 2, .servers = 2, .replans = {{1, 20}}});
  CATCH_CHECK(no_stripes.replan_status.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(absl::StrContains(no_stripes.replan_status.message(), "ownership stripes"));
  CATCH_CHECK(no_stripes.status[0].ok());
  CATCH_CHECK(no_stripes.replans[1] == 0);
  ClusterResult pulls = TrainCluster(RunSpec{.mode = Mode::kSlicingOnly, .workers = 2,
                                             .servers = 2, .owner_params = 100,
                                             .replans = {{1, 20}}});
  CATCH_CHECK(pulls.replan_status.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(absl::StrContains(pulls.replan_status.message(), "values on the push"));
  CATCH_CHECK(pulls.status[0].ok());
}

}  // namespace
}  // namespace p3::cluster_test
