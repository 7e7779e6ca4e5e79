// A cluster run interrupted and resumed from the servers' checkpoints ends with the
// parameters of the uninterrupted run, bit for bit.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "p3/core/checkpoint.h"
#include "p3/core/lr_schedule.h"
#include "p3/core/optimizer.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/testing/temp_dir.h"

namespace p3::cluster_test {
namespace {

CATCH_TEST_CASE("a run interrupted and resumed from checkpoints ends with the same parameters") {
  torch::set_num_threads(1);
  const std::string dir = p3::testing::FreshDir("resume_test");
  constexpr int kTotal = 8;
  // A schedule whose rate changes at iterations 1, 2, 3 and 6: the resumed servers must
  // take up the rate of iteration 4, not of iteration 0.
  OptimizerOptions scheduled = Sgd();
  scheduled.schedule.kind = LrScheduleKind::kStep;
  scheduled.schedule.step_size = 3;
  scheduled.schedule.gamma = 0.5;
  scheduled.schedule.warmup_iterations = 3;
  ClusterResult uninterrupted =
      TrainCluster(RunSpec{.workers = 2, .servers = 2, .steps = kTotal, .optimizer = scheduled});
  CATCH_REQUIRE(uninterrupted.status[0].ok());

  // Checkpoints at 2 and 4; the cluster dies in iteration 5.
  TrainCluster(RunSpec{.workers = 2,
                       .servers = 2,
                       .steps = 5,
                       .finish = false,
                       .checkpoint_dir = dir,
                       .checkpoint_every = 2,
                       .optimizer = scheduled});
  for (int s = 0; s < 2; ++s) {
    auto latest = ReadLatestCheckpoint(dir + "/server_" + std::to_string(s), 0);
    CATCH_REQUIRE(latest.ok());
    CATCH_CHECK(latest->iteration == 4);
  }
  // A new cluster resumes from iteration 4 and runs to the end.
  ClusterResult resumed = TrainCluster(RunSpec{.workers = 2,
                                               .servers = 2,
                                               .steps = kTotal,
                                               .checkpoint_dir = dir,
                                               .checkpoint_every = 2,
                                               .resume = true,
                                               .optimizer = scheduled});
  for (int r = 0; r < 2; ++r) {
    CATCH_REQUIRE(resumed.status[r].ok());
    CATCH_CHECK(torch::equal(resumed.params[r], uninterrupted.params[r]));  // bit for bit
  }
}

// A model of fewer slices than servers: the server that owns none sees no gradient, and
// writes its (empty) checkpoints by worker 0's Reached, so that every server has them.
CATCH_TEST_CASE("a server that owns no slice checkpoints in step with the others, and the "
                "run resumes from their newest common checkpoint") {
  torch::set_num_threads(1);
  const std::string dir = p3::testing::FreshDir("resume_empty_test");
  // The test model's 6 tensors in slices of 100,000: one slice each, none for server 6.
  RunSpec spec{.workers = 2, .servers = 7, .steps = 8};
  spec.slice_params = 100000;
  ClusterResult uninterrupted = TrainCluster(spec);
  for (int r = 0; r < 2; ++r) CATCH_REQUIRE(uninterrupted.status[r].ok());

  RunSpec first = spec;
  first.steps = 4;
  first.checkpoint_dir = dir;
  first.checkpoint_every = 2;
  ClusterResult stopped = TrainCluster(first);
  for (int r = 0; r < 2; ++r) CATCH_REQUIRE(stopped.status[r].ok());
  auto empty = ReadLatestCheckpoint(dir + "/server_6", 0);
  CATCH_REQUIRE(empty.ok());
  CATCH_CHECK(empty->iteration == 4);
  CATCH_CHECK(empty->slices.empty());
  CATCH_CHECK(NewestCommonCheckpoint(dir, 7) == 4);  // what checkpoint.resume_iteration -1 finds

  RunSpec resume = first;
  resume.steps = 8;
  resume.resume = true;
  ClusterResult resumed = TrainCluster(resume);
  for (int r = 0; r < 2; ++r) {
    CATCH_REQUIRE(resumed.status[r].ok());
    CATCH_CHECK(torch::equal(resumed.params[r], uninterrupted.params[r]));  // bit for bit
  }
}

// Packs are the config's default since 2026-12-05: a checkpoint taken before them has other
// slices. Both sides end, naming the way out, where the servers used to wait for workers
// they had refused (the run hung; under launch_cluster the launcher stopped them).
CATCH_TEST_CASE("checkpoints without packs resumed with packs: workers and servers fail, naming "
                "scheduling.pack_params: 0") {
  torch::set_num_threads(1);
  const std::string dir = p3::testing::FreshDir("resume_packs_test");
  TrainCluster(RunSpec{.workers = 2,
                       .servers = 2,
                       .steps = 3,
                       .finish = false,
                       .checkpoint_dir = dir,
                       .checkpoint_every = 2});
  // Packs of 1000: 26 slices for the 40 without (the default, 65536, would pack the whole
  // test model into one slice, which SlicePlan::Create leaves out for two servers).
  ClusterResult resumed = TrainCluster(RunSpec{.workers = 2,
                                               .servers = 2,
                                               .steps = 4,
                                               .checkpoint_dir = dir,
                                               .checkpoint_every = 2,
                                               .resume = true,
                                               .pack_params = 1000});
  for (int r = 0; r < 2; ++r) {
    CATCH_CAPTURE(resumed.status[r].ToString());
    CATCH_CHECK(absl::IsFailedPrecondition(resumed.status[r]));
    CATCH_CHECK(absl::StrContains(resumed.status[r].message(),
                                  "a checkpoint taken without packs needs scheduling.pack_params: 0"));
  }
  CATCH_REQUIRE(resumed.server_status.size() == 2);
  for (const absl::Status& server : resumed.server_status) {
    CATCH_CAPTURE(server.ToString());
    CATCH_CHECK(absl::StrContains(server.message(), "scheduling.pack_params: 0"));
  }
}

}  // namespace
}  // namespace p3::cluster_test
