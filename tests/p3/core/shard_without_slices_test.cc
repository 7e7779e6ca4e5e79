// A shard that owns no slice (a model of fewer slices than servers) writes its checkpoints
// by worker 0's Reached (docs/checkpoints.md, "A server that owns no slice"): empty, in
// step with the others, with the plan and membership of their version, and it restores
// from them.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "p3/core/parameter_shard.h"

namespace p3 {
namespace {

// One tensor of 3 parameters in one ownership stripe of 4 (server 0's), slices of 3: two
// servers, and server 1 owns nothing.
ClusterSignature OneSlice(int workers) {
  ClusterSignature sig;
  sig.num_workers = workers;
  sig.num_servers = 2;
  sig.tensors = {{"a", {3}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = 3;
  sig.plan.owner_params = 4;
  sig.values_on_push = true;
  return sig;
}

ShardOptions EmptyServer(std::vector<ShardCheckpoint>* saved) {
  ShardOptions o;
  o.server_index = 1;
  o.num_workers = 2;
  o.checkpoint_every = 2;
  o.on_checkpoint = [saved](ShardCheckpoint c) { saved->push_back(std::move(c)); };
  return o;
}

CATCH_TEST_CASE("a server that owns no slice checkpoints each checkpoint version worker 0 "
                "reaches, empty, and restores from it") {
  std::vector<ShardCheckpoint> saved;
  ParameterShard shard(EmptyServer(&saved));
  CATCH_CHECK_FALSE(shard.wants_reached());  // no plan yet
  for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard.Join(OneSlice(2), r).ok());
  CATCH_CHECK(shard.wants_reached());
  CATCH_CHECK(shard.initialized());

  CATCH_REQUIRE(shard.Reached(0, 1).ok());
  CATCH_CHECK(saved.empty());  // not a checkpoint version
  CATCH_REQUIRE(shard.Reached(0, 2).ok());
  CATCH_REQUIRE(saved.size() == 1);
  CATCH_CHECK(saved[0].iteration == 2);
  CATCH_CHECK(saved[0].server_index == 1);
  CATCH_CHECK(saved[0].slices.empty());
  CATCH_CHECK(saved[0].slice_params == 0);  // the signature's plan
  // Said again (a rejoined worker 0): once only.
  CATCH_REQUIRE(shard.Reached(0, 2).ok());
  CATCH_REQUIRE(shard.Reached(0, 1).ok());
  CATCH_CHECK(saved.size() == 1);
  // Only worker 0 says it, and only once joined.
  const absl::Status other = shard.Reached(1, 4);
  CATCH_CHECK(absl::IsInvalidArgument(other));
  CATCH_CHECK(absl::StrContains(other.message(), "only worker 0"));
  CATCH_REQUIRE(shard.Reached(0, 4).ok());
  CATCH_REQUIRE(saved.size() == 2);
  CATCH_CHECK(saved[1].iteration == 4);

  // Restored from it: starts at 4, joins, and goes on checkpointing after it.
  std::vector<ShardCheckpoint> later;
  ShardOptions r = EmptyServer(&later);
  r.restore = saved[1];
  ParameterShard restored(r);
  CATCH_CHECK(restored.start_version() == 4);
  for (int rank = 0; rank < 2; ++rank) CATCH_REQUIRE(restored.Join(OneSlice(2), rank).ok());
  CATCH_REQUIRE(restored.Reached(0, 4).ok());  // its start: written already
  CATCH_CHECK(later.empty());
  CATCH_REQUIRE(restored.Reached(0, 6).ok());
  CATCH_REQUIRE(later.size() == 1);
  CATCH_CHECK(later[0].iteration == 6);
}

CATCH_TEST_CASE("a server that owns no slice records the plan of each checkpoint's version, "
                "though it switches at the re-plan") {
  std::vector<ShardCheckpoint> saved;
  ParameterShard shard(EmptyServer(&saved));
  for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard.Join(OneSlice(2), r).ok());
  // From iteration 4 on, slices of 2: with nothing to wait for, this shard switches now.
  CATCH_REQUIRE(shard.Replan(0, 4, 2).ok());
  CATCH_CHECK(shard.replans() == 1);
  CATCH_REQUIRE(shard.Reached(0, 2).ok());
  CATCH_REQUIRE(shard.Reached(0, 4).ok());
  CATCH_REQUIRE(shard.Reached(0, 6).ok());
  CATCH_REQUIRE(saved.size() == 3);
  // What a server with slices records (AddToCheckpoint): the old plan before the re-plan,
  // the re-plan at its own iteration, the new plan after it.
  CATCH_CHECK((saved[0].slice_params == 0 && saved[0].replan_slice_params == 0));
  CATCH_CHECK((saved[1].slice_params == 0 && saved[1].replan_slice_params == 2));
  CATCH_CHECK((saved[2].slice_params == 2 && saved[2].replan_slice_params == 0));
}

CATCH_TEST_CASE("a server that owns slices, or writes no checkpoints, does not want Reached") {
  std::vector<ShardCheckpoint> saved;
  ShardOptions owner = EmptyServer(&saved);
  owner.server_index = 0;
  ParameterShard with_slices(owner);
  CATCH_REQUIRE(with_slices.Join(OneSlice(2), 0).ok());
  CATCH_CHECK_FALSE(with_slices.wants_reached());
  const absl::Status refused = with_slices.Reached(0, 2);
  CATCH_CHECK(absl::IsInvalidArgument(refused));
  CATCH_CHECK(absl::StrContains(refused.message(), "owns slices"));

  ShardOptions quiet = EmptyServer(&saved);
  quiet.checkpoint_every = 0;
  ParameterShard no_checkpoints(quiet);
  CATCH_REQUIRE(no_checkpoints.Join(OneSlice(2), 0).ok());
  CATCH_CHECK_FALSE(no_checkpoints.wants_reached());
  CATCH_REQUIRE(no_checkpoints.Reached(0, 2).ok());
  CATCH_CHECK(saved.empty());
}

}  // namespace
}  // namespace p3
