// Re-plans (ParameterShard::Replan, docs/protocol.md "Re-plan"), driven directly on the
// shard: the slices are cut anew mid-run, and training stays bit for bit the same.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "p3/core/checkpoint.h"
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
  // `configure` adjusts each server's options (rejoins, checkpoints, a restore); a shard
  // that restores gets no initial values, and its workers take its plan (takes_plan).
  explicit TwoShards(int64_t slice,
                     const std::function<void(int server, ShardOptions*)>& configure = {})
      : slice(slice) {
    bool restored = false;
    for (int s = 0; s < 2; ++s) {
      ShardOptions o;
      o.server_index = s;
      o.num_workers = 2;
      o.optimizer.lr = 0.1;
      o.optimizer.momentum = 0.9;
      o.optimizer.weight_decay = 0.01;
      if (configure) configure(s, &o);
      restored = o.restore.has_value();
      shards.push_back(std::make_unique<ParameterShard>(o));
      for (int r = 0; r < 2; ++r) {
        CATCH_REQUIRE(shards[s]->Join(StripedSignature(2, slice), r, restored).ok());
      }
    }
    plan = *SlicePlan::Create({{"a", 10}, {"b", 7}, {"c", 4}},
                              SlicePlanOptions{.slice_params = slice, .owner_params = 4,
                                               .num_servers = 2});
    if (restored) return;
    std::vector<float> init(21);
    for (int i = 0; i < 21; ++i) init[i] = 0.1f * static_cast<float>(i);
    for (const Slice& sl : plan.slices()) {
      CATCH_REQUIRE(shards[sl.server]->Init(0, sl.id, init.data() + sl.offset, sl.length).ok());
    }
  }
  // Worker r's gradients of iteration t for the slices of `server` (-1: all), at most
  // `limit` of them.
  void Send(int r, uint64_t t, int server = -1, size_t limit = SIZE_MAX) {
    size_t sent = 0;
    for (const Slice& sl : plan.slices()) {
      if ((server >= 0 && sl.server != server) || sent == limit) continue;
      std::vector<float> g(sl.length);
      for (int64_t i = 0; i < sl.length; ++i) {
        g[i] = std::sin(static_cast<float>(sl.offset + i + 7 * t)) * static_cast<float>(r + 1);
      }
      CATCH_REQUIRE(shards[sl.server]->Gradient(r, sl.id, t, g.data(), sl.length).ok());
      ++sent;
    }
  }
  void Iteration(uint64_t t) {
    for (int r = 0; r < 2; ++r) Send(r, t);
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
  // ... unless the worker takes the servers' plan (Hello.takes_plan): an older binary
  // would start from the config's plan.
  absl::StatusOr<uint64_t> rejoined = r.Rejoin(StripedSignature(2, 2), 1);
  CATCH_CHECK(absl::IsFailedPrecondition(rejoined.status()));
  CATCH_CHECK(rejoined.status().message().find("re-planned") != std::string::npos);
  CATCH_CHECK(rejoined.status().message().find("takes_plan") != std::string::npos);
  CATCH_CHECK(r.Rejoin(StripedSignature(2, 2), 1, /*takes_plan=*/true).ok());

  // Without stripes; float16; values pulled. (Checkpoints are no reason: they record
  // their plan.)
  ParameterShard plain(Options(1));
  CATCH_REQUIRE(plain.Join(Signature(1), 0).ok());
  InitAll(plain);
  CATCH_CHECK(plain.Replan(0, 5, 2).message().find("ownership stripes") != std::string::npos);
  ShardOptions f16 = Options(1);
  f16.wire_dtype = WireDType::kFloat16;
  CATCH_CHECK(ParameterShard(f16).Replan(0, 5, 2).message().find("float16") != std::string::npos);
  TwoShards checkpointed(2, [](int, ShardOptions* o) { o->checkpoint_every = 10; });
  CATCH_CHECK(checkpointed.shards[0]->Replan(0, 5, 3).ok());
  ParameterShard pulls(Options(2));
  ClusterSignature pull_sig = StripedSignature(2, 2);
  pull_sig.values_on_push = false;
  CATCH_REQUIRE(pulls.Join(pull_sig, 0).ok());
  CATCH_CHECK(pulls.Replan(0, 5, 2).message().find("pulls values") != std::string::npos);
}


bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

ClusterSignature Striped() { return StripedSignature(2, 2); }

void AllowRejoins(int, ShardOptions* o) { o->accept_rejoin = true; }

CATCH_TEST_CASE(
    "a worker rejoining after a re-plan takes the plan in force and the values end "
    "bit-identical to an uninterrupted run") {
  TwoShards fixed(2), cluster(2, AllowRejoins);
  for (uint64_t t = 0; t < 8; ++t) fixed.Iteration(t);
  cluster.Iteration(0);
  cluster.Iteration(1);
  for (auto& shard : cluster.shards) CATCH_REQUIRE(shard->Replan(0, 3, 3).ok());
  cluster.Iteration(2);  // the old plan's last: both servers switch at version 3
  cluster.plan = *cluster.plan.WithSliceParams(3);
  // Iteration 3: worker 0 sends everything; worker 1 server 0's slices, then dies.
  cluster.Send(0, 3);
  cluster.Send(1, 3, /*server=*/0);
  const PlanInForce in_force{.from_iteration = 3, .slice_params = 3};
  std::vector<uint64_t> oldest;
  for (auto& shard : cluster.shards) {
    CATCH_CHECK(shard->plan_in_force() == in_force);
    // A process that does not take the servers' plan is refused, naming the re-plan.
    absl::StatusOr<uint64_t> old_binary = shard->Rejoin(Striped(), 1);
    CATCH_CHECK(Mentions(old_binary.status(), "re-planned"));
    absl::StatusOr<uint64_t> o = shard->Rejoin(Striped(), 1, /*takes_plan=*/true);
    CATCH_REQUIRE(o.ok());
    oldest.push_back(*o);
  }
  CATCH_CHECK(oldest == std::vector<uint64_t>{4, 3});
  // It resumes at 3 in the new plan: server 0 answers its slices' version 3 (their
  // previous values), and takes its resent gradients of 3 as counted, not summed again.
  for (auto& shard : cluster.shards) {
    absl::StatusOr<std::vector<ToWorker>> resumed = shard->Resume(1, 3);
    CATCH_REQUIRE(resumed.ok());
    for (const ToWorker& m : *resumed) CATCH_CHECK(m.message.version == 3);
  }
  cluster.Send(1, 3);
  for (uint64_t t = 4; t < 8; ++t) cluster.Iteration(t);
  for (auto& shard : cluster.shards) CATCH_CHECK(shard->replans() == 1);
  CATCH_CHECK(cluster.Values() == fixed.Values());
}

CATCH_TEST_CASE(
    "a worker rejoining while a re-plan is pending resumes in the old plan and switches with "
    "everyone; refused once some slices have reached the re-plan's iteration") {
  TwoShards fixed(2);
  for (uint64_t t = 0; t < 6; ++t) fixed.Iteration(t);

  // Worker 1 dies before sending any gradient of 2; a re-plan from 3 is pending.
  TwoShards cluster(2, AllowRejoins);
  cluster.Iteration(0);
  cluster.Iteration(1);
  for (auto& shard : cluster.shards) CATCH_REQUIRE(shard->Replan(0, 3, 3).ok());
  cluster.Send(0, 2);
  for (auto& shard : cluster.shards) {
    CATCH_CHECK(shard->plan_in_force() == PlanInForce{});
    CATCH_CHECK(shard->ReplanPending() == std::make_pair(uint64_t{3}, int64_t{3}));
    CATCH_CHECK(*shard->Rejoin(Striped(), 1, true) == 2);
    CATCH_REQUIRE(shard->Resume(1, 2).ok());
  }
  cluster.Send(1, 2);  // the old plan's last iteration: the servers switch
  for (auto& shard : cluster.shards) CATCH_CHECK(shard->plan_in_force().slice_params == 3);
  cluster.plan = *cluster.plan.WithSliceParams(3);
  for (uint64_t t = 3; t < 6; ++t) cluster.Iteration(t);
  CATCH_CHECK(cluster.Values() == fixed.Values());

  // Worker 1 dies after sending server 0's slices of 2 (server 0 switched) and the first
  // of server 1's (there at 3, with the re-plan pending): neither can answer a resume at 2.
  TwoShards late(2, AllowRejoins);
  late.Iteration(0);
  late.Iteration(1);
  for (auto& shard : late.shards) CATCH_REQUIRE(shard->Replan(0, 3, 3).ok());
  late.Send(0, 2);
  late.Send(1, 2, /*server=*/0);
  late.Send(1, 2, /*server=*/1, /*limit=*/1);
  CATCH_CHECK(late.shards[0]->plan_in_force() == PlanInForce{.from_iteration = 3, .slice_params = 3});
  CATCH_CHECK(late.shards[1]->ReplanPending().has_value());
  for (auto& shard : late.shards) CATCH_REQUIRE(shard->Rejoin(Striped(), 1, true).ok());
  const absl::Status switched = late.shards[0]->Resume(1, 2).status();
  CATCH_CHECK(absl::IsFailedPrecondition(switched));
  CATCH_CHECK(Mentions(switched, "re-planned to slices of 3 from iteration 3"));
  const absl::Status pending = late.shards[1]->Resume(1, 2).status();
  CATCH_CHECK(absl::IsFailedPrecondition(pending));
  CATCH_CHECK(Mentions(pending, "a re-plan takes effect at 3"));
  // Refused without a change: the worker is still to resume (a gradient is refused).
  std::vector<float> g(2, 1.0f);
  CATCH_CHECK(Mentions(late.shards[1]->Gradient(1, 1, 2, g.data(), 2).status(), "before its Resume"));
}

CATCH_TEST_CASE(
    "checkpoints record the plan they were taken under; a restore rebuilds it and re-plans go "
    "on, bit for bit") {
  TwoShards fixed(2);
  for (uint64_t t = 0; t < 10; ++t) fixed.Iteration(t);

  std::map<uint64_t, ShardCheckpoint> taken[2];
  TwoShards cluster(2, [&taken](int s, ShardOptions* o) {
    o->checkpoint_every = 2;
    o->on_checkpoint = [&taken, s](ShardCheckpoint c) { taken[s][c.iteration] = std::move(c); };
  });
  cluster.Iteration(0);
  cluster.Iteration(1);
  cluster.Iteration(2);
  for (auto& shard : cluster.shards) CATCH_REQUIRE(shard->Replan(0, 4, 3).ok());
  cluster.Iteration(3);  // version 4: checkpoint, then the switch
  cluster.plan = *cluster.plan.WithSliceParams(3);
  cluster.Iteration(4);
  cluster.Iteration(5);  // version 6: a checkpoint in the new plan
  for (int s = 0; s < 2; ++s) {
    CATCH_CHECK(taken[s].at(2).slice_params == 0);
    CATCH_CHECK(taken[s].at(2).replan_slice_params == 0);
    CATCH_CHECK(taken[s].at(4).slice_params == 0);  // cut in the old plan ...
    CATCH_CHECK(taken[s].at(4).replan_slice_params == 3);  // ... which ends there
    CATCH_CHECK(taken[s].at(6).slice_params == 3);
    CATCH_CHECK(taken[s].at(6).replan_slice_params == 0);
  }

  for (uint64_t from : {uint64_t{4}, uint64_t{6}}) {
    CATCH_CAPTURE(from);
    // Through the file format: what is written reads back with its plan.
    std::vector<ShardCheckpoint> files;
    for (int s = 0; s < 2; ++s) {
      const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/replan_", from, "_", s);
      CATCH_REQUIRE(WriteCheckpoint(taken[s].at(from), dir).ok());
      absl::StatusOr<ShardCheckpoint> read = ReadLatestCheckpoint(dir, from);
      CATCH_REQUIRE(read.ok());
      files.push_back(*std::move(read));
    }
    // A worker that does not take the servers' plan is refused.
    ShardOptions plain;
    plain.num_workers = 2;
    plain.restore = files[0];
    CATCH_CHECK(Mentions(ParameterShard(plain).Join(Striped(), 0).status(), "takes_plan"));

    TwoShards restored(2, [&files](int s, ShardOptions* o) { o->restore = files[s]; });
    for (auto& shard : restored.shards) {
      CATCH_CHECK(shard->plan_in_force() ==
                  PlanInForce{.from_iteration = from, .slice_params = 3});
    }
    restored.plan = *restored.plan.WithSliceParams(3);
    // Re-plans go on after the restore.
    restored.Iteration(from);
    for (auto& shard : restored.shards) CATCH_REQUIRE(shard->Replan(0, from + 2, 5).ok());
    restored.Iteration(from + 1);
    restored.plan = *restored.plan.WithSliceParams(5);
    for (uint64_t t = from + 2; t < 10; ++t) restored.Iteration(t);
    CATCH_CHECK(restored.Values() == fixed.Values());
  }
}

}  // namespace
}  // namespace p3
