// Re-plans (ParameterShard::Replan, docs/protocol.md "Re-plan"), driven directly on the
// shard: the slices are cut anew mid-run, and training stays bit for bit the same.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "p3/core/parameter_shard.h"
#include "p3/core/wire_dtype.h"
#include "tests/p3/core/shard_test_util.h"

namespace p3 {
namespace {

using shard_test::InitAll;
using shard_test::Options;
using shard_test::Signature;

// A model of 3 tensors (10, 7 and 4 parameters) in stripes of 4 over 2 servers, sliced
// `slice` long. Stripes: t0 [0,4)->s0 [4,8)->s1 [8,10)->s0; t1 [0,4)->s1 [4,7)->s0;
// t2 [0,4)->s1.
ClusterSignature StripedSignature(int workers, int64_t slice) {
  ClusterSignature sig;
  sig.num_workers = workers;
  sig.num_servers = 2;
  sig.tensors = {{"a", {10}, "float32"}, {"b", {7}, "float32"}, {"c", {4}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = slice;
  sig.plan.owner_params = 4;
  return sig;
}

// Drives both servers of a striped 2-worker cluster with the same per-parameter
// gradients whatever the plan: gradient of parameter i at iteration t is
// sin(i + 7 t) * (rank + 1). Re-plans to `replan_to` (0: none) before iteration 2's.
struct TwoShards {
  explicit TwoShards(int64_t slice) : slice(slice) {
    for (int s = 0; s < 2; ++s) {
      ShardOptions o;
      o.server_index = s;
      o.num_workers = 2;
      o.optimizer.lr = 0.1;
      o.optimizer.momentum = 0.9;
      o.optimizer.weight_decay = 0.01;
      shards.push_back(std::make_unique<ParameterShard>(o));
      for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shards[s]->Join(StripedSignature(2, slice), r).ok());
    }
    plan = *SlicePlan::Create({{"a", 10}, {"b", 7}, {"c", 4}},
                              SlicePlanOptions{.slice_params = slice, .owner_params = 4,
                                               .num_servers = 2});
    std::vector<float> init(21);
    for (int i = 0; i < 21; ++i) init[i] = 0.1f * static_cast<float>(i);
    for (const Slice& sl : plan.slices()) {
      CATCH_REQUIRE(shards[sl.server]->Init(0, sl.id, init.data() + sl.offset, sl.length).ok());
    }
  }
  void Iteration(uint64_t t) {
    for (int r = 0; r < 2; ++r) {
      for (const Slice& sl : plan.slices()) {
        std::vector<float> g(sl.length);
        for (int64_t i = 0; i < sl.length; ++i) {
          g[i] = std::sin(static_cast<float>(sl.offset + i + 7 * t)) * static_cast<float>(r + 1);
        }
        CATCH_REQUIRE(shards[sl.server]->Gradient(r, sl.id, t, g.data(), sl.length).ok());
      }
    }
  }
  std::vector<float> Values() const {
    std::vector<float> all(21);
    for (const Slice& sl : plan.slices()) {
      auto v = shards[sl.server]->SliceValues(sl.id);
      CATCH_REQUIRE(v.ok());
      std::copy(v->first.begin(), v->first.end(), all.begin() + sl.offset);
    }
    return all;
  }
  int64_t slice;
  SlicePlan plan = *SlicePlan::Create({{"x", 1}}, SlicePlanOptions{});
  std::vector<std::unique_ptr<ParameterShard>> shards;
};

CATCH_TEST_CASE("a re-plan keeps every parameter's values and momentum: training is bit for bit the same") {
  TwoShards fixed(2), replanned(2);
  for (uint64_t t = 0; t < 2; ++t) {
    fixed.Iteration(t);
    replanned.Iteration(t);
  }
  // Asked before iteration 2's gradients... at version 2 already: too late, refused.
  for (auto& shard : replanned.shards) {
    absl::Status late = shard->Replan(0, 2, 3);
    CATCH_CHECK(absl::IsFailedPrecondition(late));
    CATCH_CHECK(late.message().find("at version 2 already") != std::string::npos);
  }
  fixed.Iteration(2);
  for (auto& shard : replanned.shards) CATCH_REQUIRE(shard->Replan(0, 4, 3).ok());
  replanned.Iteration(2);
  // Iteration 3 is still the old plan's; the switch comes with its last gradient.
  replanned.Iteration(3);
  fixed.Iteration(3);
  for (auto& shard : replanned.shards) CATCH_CHECK(shard->replans() == 1);
  replanned.plan = *replanned.plan.WithSliceParams(3);
  CATCH_CHECK(replanned.Values() == fixed.Values());
  // The switch allocated the new slices' snapshot buffers (the current version's and a
  // spare): the first updates on the new plan allocate none, where a buffer allocated
  // then was fresh memory in a timed iteration.
  std::vector<int64_t> allocated;
  for (auto& shard : replanned.shards) allocated.push_back(shard->SnapshotAllocations());
  // The old plan's states are retired with their buffers given up: after two rounds of the
  // new plan (one to have a previous version) a shard holds what the same shard without
  // re-plans holds, not twice that.
  for (uint64_t t = 4; t < 6; ++t) {
    fixed.Iteration(t);
    replanned.Iteration(t);
  }
  for (size_t i = 0; i < fixed.shards.size(); ++i) {
    CATCH_CHECK(fixed.shards[i]->StateFloats() > 0);
    CATCH_CHECK(replanned.shards[i]->StateFloats() == fixed.shards[i]->StateFloats());
    CATCH_CHECK(replanned.shards[i]->SnapshotAllocations() == allocated[i]);
  }
  for (uint64_t t = 6; t < 8; ++t) {
    fixed.Iteration(t);
    replanned.Iteration(t);
  }
  CATCH_CHECK(replanned.Values() == fixed.Values());
  // Slice ids are the new plan's: slice 0 is 3 long now (it was 2), and a gradient of the
  // old plan's last slice id (10, c [2,4)) names a slice the plan no longer has.
  CATCH_CHECK(replanned.shards[0]->SliceSpan(0)->second == 3);
  std::vector<float> four(4, 1.0f);
  CATCH_CHECK(absl::IsInvalidArgument(replanned.shards[0]->Gradient(0, 0, 8, four.data(), 4).status()));
  CATCH_CHECK(fixed.plan.slices().size() == 11);
  CATCH_CHECK(replanned.plan.slices().size() == 10);
  CATCH_CHECK(absl::IsInvalidArgument(replanned.shards[1]->Gradient(0, 10, 8, four.data(), 2).status()));
}

CATCH_TEST_CASE("a re-plan is refused unless rank 0 asks, the plan has stripes and nothing rules it out") {
  TwoShards cluster(2);
  ParameterShard& shard = *cluster.shards[0];
  CATCH_CHECK(shard.Replan(1, 5, 3).message().find("only worker 0 re-plans") != std::string::npos);
  CATCH_CHECK(shard.Replan(0, 5, 0).message().find("slice_params must be >= 1") != std::string::npos);
  CATCH_REQUIRE(shard.Replan(0, 5, 3).ok());
  CATCH_CHECK(shard.ReplanPending() == std::make_pair(uint64_t{5}, int64_t{3}));
  CATCH_CHECK(shard.Replan(0, 6, 1).message().find("is pending") != std::string::npos);
  // No rejoin while one is pending (nor after).
  ShardOptions rejoins;
  rejoins.num_workers = 2;
  rejoins.accept_rejoin = true;
  ParameterShard r(rejoins);
  for (int w = 0; w < 2; ++w) CATCH_REQUIRE(r.Join(StripedSignature(2, 2), w).ok());
  SlicePlan plan = cluster.plan;
  std::vector<float> zeros(21, 0.0f);
  for (int id : plan.server_slices(0)) {
    CATCH_REQUIRE(r.Init(0, id, zeros.data(), plan.slices()[id].length).ok());
  }
  CATCH_REQUIRE(r.Replan(0, 3, 4).ok());
  absl::StatusOr<uint64_t> rejoined = r.Rejoin(StripedSignature(2, 2), 1);
  CATCH_CHECK(absl::IsFailedPrecondition(rejoined.status()));
  CATCH_CHECK(rejoined.status().message().find("re-planned") != std::string::npos);

  // Without stripes; float16; checkpoints; values pulled.
  ParameterShard plain(Options(1));
  CATCH_REQUIRE(plain.Join(Signature(1), 0).ok());
  InitAll(plain);
  CATCH_CHECK(plain.Replan(0, 5, 2).message().find("ownership stripes") != std::string::npos);
  ShardOptions f16 = Options(1);
  f16.wire_dtype = WireDType::kFloat16;
  CATCH_CHECK(ParameterShard(f16).Replan(0, 5, 2).message().find("float16") != std::string::npos);
  ShardOptions ckpt = Options(1);
  ckpt.checkpoint_every = 10;
  CATCH_CHECK(ParameterShard(ckpt).Replan(0, 5, 2).message().find("checkpoints") !=
              std::string::npos);
  ParameterShard pulls(Options(2));
  ClusterSignature pull_sig = StripedSignature(2, 2);
  pull_sig.values_on_push = false;
  CATCH_REQUIRE(pulls.Join(pull_sig, 0).ok());
  CATCH_CHECK(pulls.Replan(0, 5, 2).message().find("pulls values") != std::string::npos);
}

}  // namespace
}  // namespace p3
