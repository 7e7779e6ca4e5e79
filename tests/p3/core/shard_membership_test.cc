// Elastic membership in the server's state machine (docs/reliability.md, "Elastic
// membership"): the present set changes at an iteration boundary; each update sums the
// present ranks' gradients in rank order and divides by their count.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "p3/core/parameter_shard.h"
#include "tests/p3/core/shard_test_util.h"

namespace p3 {
namespace {

using shard_test::InitAll;
using shard_test::Signature;

// Up to `max_ranks` workers, ranks 0..initial-1 present at the start; SGD at rate 1.
ShardOptions Elastic(int max_ranks, int initial, double lr = 1.0) {
  ShardOptions o = shard_test::Options(max_ranks, lr);
  o.initial_workers = initial;
  return o;
}

bool Mentions(const absl::Status& s, const std::string& what) {
  return std::string(s.message()).find(what) != std::string::npos;
}

// The ranks `out` sends to, in order.
std::vector<int> Ranks(const std::vector<ToWorker>& out) {
  std::vector<int> ranks;
  for (const ToWorker& m : out) ranks.push_back(m.rank);
  return ranks;
}

// Worker r's gradient of slice 0 (3 values) at iteration t.
std::vector<float> Grad(int r, uint64_t t) {
  return {static_cast<float>(r + 1), static_cast<float>(t % 7) - 3.0f,
          static_cast<float>(r * r) + 0.25f};
}

CATCH_TEST_CASE("a 2 -> 3 -> 2 run applies the mean of the present workers' gradients") {
  ParameterShard shard(Elastic(/*max_ranks=*/3, /*initial=*/2));
  CATCH_REQUIRE(shard.Join(Signature(3), 0).ok());
  CATCH_REQUIRE(shard.Join(Signature(3), 1).ok());
  InitAll(shard);
  std::vector<float> want = {1, 2, 3};  // slice 0's values, computed by hand
  auto present_at = [](uint64_t t) {
    return t >= 2 && t < 4 ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1};
  };
  for (uint64_t t = 0; t < 6; ++t) {
    if (t == 1) {
      // Rank 2 says Hello mid-run: no values yet, it is not present until iteration 2.
      auto joined = shard.Join(Signature(3), 2);
      CATCH_REQUIRE(joined.ok());
      CATCH_CHECK(joined->empty());
      // Rank 0 asks, before its gradients of iteration 1.
      CATCH_REQUIRE(shard.ChangeMembership(0, 2, {0, 1, 2}).ok());
    }
    if (t == 3) CATCH_REQUIRE(shard.ChangeMembership(0, 4, {0, 1}).ok());
    const std::vector<int> present = present_at(t);
    std::vector<ToWorker> last;
    // Arrival order reversed: the sum is still in rank order.
    for (auto it = present.rbegin(); it != present.rend(); ++it) {
      const std::vector<float> g = Grad(*it, t);
      auto out = shard.Gradient(*it, 0, t, g.data(), 3);
      CATCH_REQUIRE(out.ok());
      last = *out;
    }
    for (int j = 0; j < 3; ++j) {
      float sum = 0;
      for (int r : present) sum += Grad(r, t)[j];
      want[j] += -1.0f * (sum / static_cast<float>(present.size()));
    }
    // Version t+1 goes to the ranks present in iteration t+1: rank 2 gets version 2 as
    // its first values and nothing after version 3.
    CATCH_CHECK(Ranks(last) == present_at(t + 1));
    CATCH_REQUIRE(!last.empty());
    CATCH_CHECK(last[0].message.version == t + 1);
    CATCH_CHECK(DecodedValues(last[0].message) == want);
  }
  auto values = shard.SliceValues(0);
  CATCH_REQUIRE(values.ok());
  CATCH_CHECK(values->first == want);
  CATCH_CHECK(values->second == 6);
  const std::vector<MembershipChange> changes = shard.Membership();
  CATCH_REQUIRE(changes.size() == 3);
  CATCH_CHECK(changes[1].from_iteration == 2);
  CATCH_CHECK(changes[2].present == std::vector<int>{0, 1});
}

CATCH_TEST_CASE("the divisor follows the present count, not the cluster size") {
  // Same gradients, once with 2 of 3 ranks present and once in a fixed 2-worker cluster.
  ParameterShard elastic(Elastic(3, 2, 0.5));
  ParameterShard fixed(shard_test::Options(2, 0.5));
  for (int r = 0; r < 2; ++r) {
    CATCH_REQUIRE(elastic.Join(Signature(3), r).ok());
    CATCH_REQUIRE(fixed.Join(Signature(2), r).ok());
  }
  InitAll(elastic);
  InitAll(fixed);
  for (int r = 0; r < 2; ++r) {
    const std::vector<float> g = Grad(r, 0);
    CATCH_REQUIRE(elastic.Gradient(r, 0, 0, g.data(), 3).ok());
    CATCH_REQUIRE(fixed.Gradient(r, 0, 0, g.data(), 3).ok());
  }
  CATCH_CHECK(elastic.SliceValues(0)->first == fixed.SliceValues(0)->first);
  CATCH_CHECK(elastic.SliceValues(0)->second == 1);
}

CATCH_TEST_CASE("an elastic sum skips absent ranks and keeps rank order in any arrival order") {
  // Ranks 0, 2, 3 present after rank 1 left and rank 3 joined; values whose float sum
  // depends on the order: (1e8 + -1e8) + 1 = 1, 1e8 + (-1e8 + 1) = 0.
  const std::vector<std::vector<float>> by_rank = {
      {1e8f, 0, 0}, {}, {-1e8f, 0, 0}, {1.0f, 0, 0}};
  std::vector<std::vector<float>> results;
  for (const std::vector<int>& order :
       {std::vector<int>{0, 2, 3}, std::vector<int>{3, 2, 0}, std::vector<int>{2, 0, 3}}) {
    ParameterShard shard(Elastic(4, 3));
    for (int r = 0; r < 4; ++r) CATCH_REQUIRE(shard.Join(Signature(4), r).ok());
    InitAll(shard);
    CATCH_REQUIRE(shard.ChangeMembership(0, 1, {0, 2, 3}).ok());
    const std::vector<float> g = {0, 0, 0};
    for (int r = 0; r < 3; ++r) CATCH_REQUIRE(shard.Gradient(r, 0, 0, g.data(), 3).ok());
    for (int r : order) CATCH_REQUIRE(shard.Gradient(r, 0, 1, by_rank[r].data(), 3).ok());
    results.push_back(shard.SliceValues(0)->first);
  }
  CATCH_CHECK(results[0][0] == 1.0f - ((1e8f + -1e8f) + 1.0f) / 3.0f);
  CATCH_CHECK(results[1] == results[0]);
  CATCH_CHECK(results[2] == results[0]);
}

CATCH_TEST_CASE("a membership change that does not fit is refused and changes nothing") {
  ParameterShard shard(Elastic(3, 2));
  CATCH_REQUIRE(shard.Join(Signature(3), 0).ok());
  CATCH_REQUIRE(shard.Join(Signature(3), 1).ok());
  CATCH_CHECK(Mentions(shard.ChangeMembership(0, 2, {0, 1, 2}), "initial value"));
  InitAll(shard);
  CATCH_CHECK(Mentions(shard.ChangeMembership(1, 2, {0, 1}), "only worker 0"));
  CATCH_CHECK(Mentions(shard.ChangeMembership(0, 2, {1}), "rank 0 must be present"));
  CATCH_CHECK(Mentions(shard.ChangeMembership(0, 2, {0, 1, 2}), "worker 2 joins but has not"));
  // A gradient from a rank that is not present is refused, naming the present set.
  CATCH_REQUIRE(shard.Join(Signature(3), 2).ok());
  const std::vector<float> g = Grad(2, 0);
  const absl::Status absent = shard.Gradient(2, 0, 0, g.data(), 3).status();
  CATCH_CHECK(absent.code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(Mentions(absent, "not present in that iteration (workers 0, 1)"));
  // Slice 0 at version 1: a change from iteration 1 comes too late.
  for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard.Gradient(r, 0, 0, Grad(r, 0).data(), 3).ok());
  CATCH_CHECK(Mentions(shard.ChangeMembership(0, 1, {0, 1, 2}), "at version 1 already"));
  CATCH_CHECK(shard.Membership().size() == 1);
  // A fitting change still goes through; then rank 1 leaves and cannot come back.
  CATCH_REQUIRE(shard.ChangeMembership(0, 2, {0, 2}).ok());
  CATCH_CHECK(Mentions(shard.ChangeMembership(0, 3, {0, 1, 2}), "rank 1 has left"));
  CATCH_CHECK(shard.Membership().size() == 2);
}

CATCH_TEST_CASE("membership changes are refused when the run is not elastic") {
  ParameterShard shard(shard_test::Options(2));
  for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard.Join(Signature(2), r).ok());
  InitAll(shard);
  CATCH_CHECK(Mentions(shard.ChangeMembership(0, 1, {0}), "cluster.elastic"));
}

CATCH_TEST_CASE("a run ends when every worker that joined is done, leavers included") {
  ParameterShard shard(Elastic(3, 2));
  for (int r = 0; r < 3; ++r) CATCH_REQUIRE(shard.Join(Signature(3), r).ok());
  InitAll(shard);
  CATCH_REQUIRE(shard.ChangeMembership(0, 1, {0, 1, 2}).ok());
  CATCH_REQUIRE(shard.ChangeMembership(0, 2, {0, 2}).ok());
  CATCH_CHECK(!shard.Finish(1));  // rank 1 leaves
  CATCH_CHECK(!shard.Finish(0));
  CATCH_CHECK(shard.Finish(2));
}

CATCH_TEST_CASE("a joining worker's pull of its first version waits for the update") {
  ParameterShard shard(Elastic(3, 2));
  for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard.Join(Signature(3, false), r).ok());
  InitAll(shard);
  CATCH_REQUIRE(shard.Join(Signature(3, false), 2).ok());
  // Before any change names it, rank 2 may pull nothing.
  CATCH_CHECK(!shard.Pull(2, 0, 0).ok());
  CATCH_CHECK(!shard.Pull(2, 0, 1).ok());
  CATCH_REQUIRE(shard.ChangeMembership(0, 1, {0, 1, 2}).ok());
  auto pending = shard.Pull(2, 0, 1);
  CATCH_REQUIRE(pending.ok());
  CATCH_CHECK(pending->empty());
  CATCH_REQUIRE(shard.Gradient(0, 0, 0, Grad(0, 0).data(), 3).ok());
  auto last = shard.Gradient(1, 0, 0, Grad(1, 0).data(), 3);
  CATCH_REQUIRE(last.ok());
  // Ranks 0 and 1 have not pulled yet: version 1 goes to rank 2 alone, with the Ack.
  std::vector<int> params_to;
  for (const ToWorker& m : *last) {
    if (m.message.kind == Downstream::Kind::kParams) params_to.push_back(m.rank);
  }
  CATCH_CHECK(params_to == std::vector<int>{2});
  CATCH_CHECK((*last)[0].message.kind == Downstream::Kind::kAck);
}

CATCH_TEST_CASE("a buffer round averages the workers present in the iteration before it") {
  ParameterShard shard(Elastic(3, 2));
  for (int r = 0; r < 3; ++r) CATCH_REQUIRE(shard.Join(Signature(3), r).ok());
  InitAll(shard);
  CATCH_REQUIRE(shard.ChangeMembership(0, 1, {0, 1, 2}).ok());
  const std::vector<float> b0 = {3}, b1 = {6}, b2 = {12};
  // Round 1 follows iteration 0, which ranks 0 and 1 trained.
  CATCH_CHECK(!shard.Buffers(2, 1, b2.data(), 1).ok());
  CATCH_REQUIRE(shard.Buffers(0, 1, b0.data(), 1).ok());
  auto one = shard.Buffers(1, 1, b1.data(), 1);
  CATCH_REQUIRE(one.ok());
  CATCH_CHECK(Ranks(*one) == std::vector<int>{0, 1});
  CATCH_CHECK((*(*one)[0].message.buffers)[0] == 4.5f);
  // Round 2 follows iteration 1: all three.
  CATCH_REQUIRE(shard.Buffers(0, 2, b0.data(), 1).ok());
  CATCH_REQUIRE(shard.Buffers(1, 2, b1.data(), 1).ok());
  auto two = shard.Buffers(2, 2, b2.data(), 1);
  CATCH_REQUIRE(two.ok());
  CATCH_CHECK(Ranks(*two) == std::vector<int>{0, 1, 2});
  CATCH_CHECK((*(*two)[0].message.buffers)[0] == 7.0f);
}

CATCH_TEST_CASE(
    "an elastic checkpoint records the membership up to its iteration, and a restored shard "
    "sums the present set it names") {
  std::vector<ShardCheckpoint> saved;
  ShardOptions o = Elastic(/*max_ranks=*/3, /*initial=*/2);
  o.checkpoint_every = 2;
  o.on_checkpoint = [&](ShardCheckpoint c) { saved.push_back(std::move(c)); };
  ParameterShard shard(o);
  for (int r = 0; r < 3; ++r) CATCH_REQUIRE(shard.Join(Signature(3), r).ok());
  InitAll(shard);
  // {0, 1} in iteration 0, {0, 1, 2} from 1; the change from 3 is known before the
  // checkpoint of iteration 2 is cut and left out of it.
  CATCH_REQUIRE(shard.ChangeMembership(0, 1, {0, 1, 2}).ok());
  CATCH_REQUIRE(shard.ChangeMembership(0, 3, {0, 2}).ok());
  for (uint64_t t = 0; t < 2; ++t) {
    for (int r : t == 0 ? std::vector<int>{0, 1} : std::vector<int>{0, 1, 2}) {
      for (int slice = 0; slice < 3; ++slice) {
        const std::vector<float> g = Grad(r, t);
        CATCH_REQUIRE(shard.Gradient(r, slice, t, g.data(), slice == 0 ? 3 : 2).ok());
      }
    }
  }
  CATCH_REQUIRE(saved.size() == 1);
  CATCH_CHECK(saved[0].iteration == 2);
  CATCH_REQUIRE(saved[0].membership.size() == 2);
  CATCH_CHECK(saved[0].membership[1].from_iteration == 1);
  CATCH_CHECK(saved[0].membership[1].present == std::vector<int>{0, 1, 2});

  // Restored: iteration 2 is summed over {0, 1, 2} and divided by 3, as in the original.
  ShardOptions r = Elastic(3, 2);
  r.restore = saved[0];
  ParameterShard restored(r);
  for (int rank = 0; rank < 3; ++rank) {
    auto joined = restored.Join(Signature(3), rank);
    CATCH_REQUIRE(joined.ok());
    CATCH_CHECK(joined->size() == 3);  // every present rank gets version 2 at once
  }
  CATCH_CHECK(restored.Membership().size() == 2);
  for (ParameterShard* s : {&shard, &restored}) {
    for (int rank : {0, 1, 2}) {
      const std::vector<float> g = Grad(rank, 2);
      CATCH_REQUIRE(s->Gradient(rank, 0, 2, g.data(), 3).ok());
    }
  }
  CATCH_CHECK(restored.SliceValues(0)->first == shard.SliceValues(0)->first);
  CATCH_CHECK(restored.SliceValues(0)->second == 3);
  // The restored changes are in force: a new one must come after iteration 1's.
  CATCH_CHECK(Mentions(restored.ChangeMembership(0, 1, {0, 1}),
                       "the last change took effect at iteration 1"));

  // A checkpoint of a run that started with other workers does not fit.
  ShardOptions other = Elastic(3, 1);
  other.restore = saved[0];
  ParameterShard mismatched(other);
  auto refused = mismatched.Join(Signature(3), 0);
  CATCH_REQUIRE(!refused.ok());
  CATCH_CHECK(Mentions(refused.status(), "its run started with workers {0, 1}; this one with {0}"));
}

}  // namespace
}  // namespace p3
