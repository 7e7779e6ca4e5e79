// A worker's process dies and a new one takes its rank (ParameterShard::Rejoin / Resume),
// driven directly on the shard: no transport.
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "p3/core/parameter_shard.h"
#include "p3/core/wire_dtype.h"

namespace p3 {
namespace {

// Two tensors: "w" (5 params) and "b" (2), slices of 3 params, one server:
// slices 0:[0,3) 1:[3,5) of w, 2:[5,7) b.
ClusterSignature Signature(bool values_on_push = true) {
  ClusterSignature sig;
  sig.num_workers = 2;
  sig.num_servers = 1;
  sig.tensors = {{"w", {5}, "float32"}, {"b", {2}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = 3;
  sig.values_on_push = values_on_push;
  return sig;
}

ShardOptions Options(bool accept_rejoin = true) {
  ShardOptions o;
  o.num_workers = 2;
  o.optimizer.lr = 0.1;
  o.optimizer.momentum = 0.9;  // optimizer state must not be disturbed either
  o.accept_rejoin = accept_rejoin;
  return o;
}

constexpr int kSlices = 3;
const int64_t kLength[kSlices] = {3, 2, 2};

void JoinAndInit(ParameterShard& shard, bool values_on_push = true) {
  CATCH_REQUIRE(shard.Join(Signature(values_on_push), 0).ok());
  CATCH_REQUIRE(shard.Join(Signature(values_on_push), 1).ok());
  std::vector<float> w = {1, 2, 3, 4, 5}, b = {6, 7};
  CATCH_REQUIRE(shard.Init(0, 0, w.data(), 3).ok());
  CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
  CATCH_REQUIRE(shard.Init(0, 2, b.data(), 2).ok());
}

// The gradient worker `rank` computes for `slice` at `iteration`: deterministic, as a
// restarted process recomputes exactly what the dead one sent.
std::vector<float> Grad(int rank, int slice, uint64_t iteration) {
  std::vector<float> g;
  for (int64_t i = 0; i < kLength[slice]; ++i) {
    g.push_back(0.25f * static_cast<float>(rank + 1) + 0.5f * static_cast<float>(slice) -
                0.125f * static_cast<float>(i) + 0.0625f * static_cast<float>(iteration));
  }
  return g;
}

absl::Status Send(ParameterShard& shard, int rank, int slice, uint64_t iteration,
                  std::vector<ToWorker>* out = nullptr) {
  const std::vector<float> g = Grad(rank, slice, iteration);
  absl::StatusOr<std::vector<ToWorker>> o =
      shard.Gradient(rank, slice, iteration, g.data(), static_cast<int64_t>(g.size()));
  if (o.ok() && out != nullptr) *out = *std::move(o);
  return o.status();
}

std::vector<std::vector<float>> Values(const ParameterShard& shard) {
  std::vector<std::vector<float>> v;
  for (int s = 0; s < kSlices; ++s) {
    auto got = shard.SliceValues(s);
    CATCH_REQUIRE(got.ok());
    v.push_back(got->first);
  }
  return v;
}

// Both workers send every slice's gradient of `iteration`.
void FullIteration(ParameterShard& shard, uint64_t iteration) {
  for (int s = 0; s < kSlices; ++s) {
    for (int r = 0; r < 2; ++r) CATCH_REQUIRE(Send(shard, r, s, iteration).ok());
  }
}

CATCH_TEST_CASE(
    "a worker dying after its gradient was summed, whole or in part, resends it and the "
    "values end bit-identical") {
  ParameterShard reference(Options());
  JoinAndInit(reference);
  for (uint64_t it = 0; it < 3; ++it) FullIteration(reference, it);

  ParameterShard shard(Options());
  JoinAndInit(shard);
  FullIteration(shard, 0);
  // Iteration 1: worker 0 (first in the sum) sends slice 0 whole and a part of slice 2,
  // which are summed on arrival, then dies; worker 1 has sent nothing yet.
  CATCH_REQUIRE(Send(shard, 0, 0, 1).ok());
  const std::vector<float> part = Grad(0, 2, 1);
  CATCH_REQUIRE(shard.Gradient(0, 2, 1, part.data(), 1, 0).ok());
  // Worker 1 sends slice 1 (it waits for worker 0's, which comes after the rejoin).
  CATCH_REQUIRE(Send(shard, 1, 1, 1).ok());
  absl::StatusOr<uint64_t> oldest = shard.Rejoin(Signature(), 0);
  CATCH_REQUIRE(oldest.ok());
  CATCH_CHECK(*oldest == 1);
  CATCH_REQUIRE(shard.Resume(0, 1).ok());
  // The new process resends all of iteration 1; worker 1 sends the rest.
  for (int s = 0; s < kSlices; ++s) CATCH_REQUIRE(Send(shard, 0, s, 1).ok());
  CATCH_REQUIRE(Send(shard, 1, 0, 1).ok());
  CATCH_REQUIRE(Send(shard, 1, 2, 1).ok());
  FullIteration(shard, 2);
  CATCH_CHECK(Values(shard) == Values(reference));
  for (int s = 0; s < kSlices; ++s) CATCH_CHECK(shard.SliceValues(s)->second == 3);
}

CATCH_TEST_CASE(
    "a rejoined worker resumes and the values end bit-identical to an uninterrupted run") {
  ParameterShard reference(Options());
  JoinAndInit(reference);
  for (uint64_t it = 0; it < 4; ++it) FullIteration(reference, it);

  ParameterShard shard(Options());
  JoinAndInit(shard);
  FullIteration(shard, 0);
  // Iteration 1: worker 1 sends slice 0 whole and half of slice 2, then dies. Worker 0
  // sends everything. Slice 0 reaches version 2; slices 1 and 2 wait at version 1.
  CATCH_REQUIRE(Send(shard, 1, 0, 1).ok());
  const std::vector<float> half = Grad(1, 2, 1);
  CATCH_REQUIRE(shard.Gradient(1, 2, 1, half.data(), 1, 0).ok());
  for (int s = 0; s < kSlices; ++s) CATCH_REQUIRE(Send(shard, 0, s, 1).ok());
  CATCH_REQUIRE(shard.SliceValues(0)->second == 2);
  CATCH_REQUIRE(shard.SliceValues(2)->second == 1);
  const std::vector<float> version1_slice0 = [] {
    ParameterShard one(Options());
    JoinAndInit(one);
    FullIteration(one, 0);
    return one.SliceValues(0)->first;
  }();

  // The new process: oldest version 1; at version 1 it gets slice 0's previous values.
  absl::StatusOr<uint64_t> oldest = shard.Rejoin(Signature(), 1);
  CATCH_REQUIRE(oldest.ok());
  CATCH_CHECK(*oldest == 1);
  absl::StatusOr<std::vector<ToWorker>> resumed = shard.Resume(1, 1);
  CATCH_REQUIRE(resumed.ok());
  CATCH_REQUIRE(resumed->size() == kSlices);
  for (const ToWorker& o : *resumed) {
    CATCH_CHECK(o.rank == 1);
    CATCH_CHECK(o.message.kind == Downstream::Kind::kParams);
    CATCH_CHECK(o.message.version == 1);
  }
  CATCH_CHECK(DecodedValues((*resumed)[0].message) == version1_slice0);

  // Its iteration 1 again, whole: slice 0's is answered with version 2 to it alone, the
  // others complete their update (the half part of the dead process was dropped).
  std::vector<ToWorker> out;
  CATCH_REQUIRE(Send(shard, 1, 0, 1, &out).ok());
  CATCH_REQUIRE(out.size() == 1);
  CATCH_CHECK(out[0].rank == 1);
  CATCH_CHECK(out[0].message.version == 2);
  CATCH_REQUIRE(Send(shard, 1, 1, 1, &out).ok());
  CATCH_CHECK(out.size() == 2);  // version 2 to both workers
  CATCH_REQUIRE(Send(shard, 1, 2, 1, &out).ok());
  CATCH_CHECK(out.size() == 2);
  // Answered once only: a second gradient of iteration 1 for slice 0 is refused.
  CATCH_CHECK(absl::IsInvalidArgument(Send(shard, 1, 0, 1)));
  for (uint64_t it = 2; it < 4; ++it) FullIteration(shard, it);
  CATCH_CHECK(Values(shard) == Values(reference));
  for (int s = 0; s < kSlices; ++s) CATCH_CHECK(shard.SliceValues(s)->second == 4);
}

CATCH_TEST_CASE(
    "without values on push a rejoined worker's repeated gradient is acked and its pull served") {
  ParameterShard reference(Options());
  JoinAndInit(reference, /*values_on_push=*/false);
  FullIteration(reference, 0);

  ParameterShard shard(Options());
  JoinAndInit(shard, /*values_on_push=*/false);
  CATCH_REQUIRE(Send(shard, 1, 0, 0).ok());
  CATCH_REQUIRE(shard.Pull(1, 0, 1).ok());  // pending when it died
  CATCH_REQUIRE(Send(shard, 0, 0, 0).ok());
  CATCH_REQUIRE(Send(shard, 1, 1, 0).ok());  // slice 1: has its gradient, not worker 0's
  CATCH_REQUIRE(shard.Rejoin(Signature(false), 1).ok());
  CATCH_REQUIRE(shard.Resume(1, 0).ok());
  std::vector<ToWorker> out;
  CATCH_REQUIRE(Send(shard, 1, 0, 0, &out).ok());
  CATCH_REQUIRE(out.size() == 1);
  CATCH_CHECK(out[0].message.kind == Downstream::Kind::kAck);
  CATCH_CHECK(out[0].message.iteration == 0);
  auto pulled = shard.Pull(1, 0, 1);
  CATCH_REQUIRE(pulled.ok());
  CATCH_REQUIRE(pulled->size() == 1);
  CATCH_CHECK((*pulled)[0].message.version == 1);
  // Slice 1's gradient of the dead process was dropped: sent again, it counts once.
  CATCH_REQUIRE(Send(shard, 1, 1, 0).ok());
  CATCH_REQUIRE(Send(shard, 0, 1, 0).ok());
  CATCH_REQUIRE(Send(shard, 0, 2, 0).ok());
  CATCH_REQUIRE(Send(shard, 1, 2, 0).ok());
  CATCH_CHECK(Values(shard) == Values(reference));
}

CATCH_TEST_CASE(
    "a rejoin is refused when rejoins are off, before the initial values, and after Done") {
  ParameterShard off(Options(/*accept_rejoin=*/false));
  JoinAndInit(off);
  absl::StatusOr<uint64_t> refused = off.Rejoin(Signature(), 1);
  CATCH_CHECK(absl::IsFailedPrecondition(refused.status()));
  CATCH_CHECK(refused.status().message().find("cluster.rejoin_timeout_s") != std::string::npos);

  ParameterShard early(Options());
  CATCH_REQUIRE(early.Join(Signature(), 0).ok());
  refused = early.Rejoin(Signature(), 1);
  CATCH_CHECK(absl::IsFailedPrecondition(refused.status()));
  CATCH_CHECK(refused.status().message().find("before the initial values") != std::string::npos);

  ParameterShard done(Options());
  JoinAndInit(done);
  done.Finish(1);
  refused = done.Rejoin(Signature(), 1);
  CATCH_CHECK(absl::IsFailedPrecondition(refused.status()));
  CATCH_CHECK(refused.status().message().find("after its Done") != std::string::npos);

  ClusterSignature other = Signature();
  other.tensors[0].shape = {4};
  refused = done.Rejoin(other, 0);
  CATCH_CHECK(absl::IsFailedPrecondition(refused.status()));
  // CheckRejoin says the same and changes nothing: rank 0 still trains on.
  CATCH_CHECK(absl::IsFailedPrecondition(done.CheckRejoin(other, 0)));
  CATCH_CHECK(done.CheckRejoin(Signature(), 0).ok());
  CATCH_CHECK(Send(done, 0, 0, 0).ok());
}

CATCH_TEST_CASE("a rejoined worker must resume first, at a version its slices are at") {
  ParameterShard shard(Options());
  JoinAndInit(shard);
  FullIteration(shard, 0);
  CATCH_CHECK(absl::IsFailedPrecondition(shard.Resume(1, 1).status()));  // no Rejoin
  CATCH_REQUIRE(shard.Rejoin(Signature(), 1).ok());
  // Before the Resume nothing else is accepted.
  CATCH_CHECK(absl::IsFailedPrecondition(Send(shard, 1, 0, 1)));
  // 3 is neither a slice's version nor the one before: refused, nothing changes.
  CATCH_CHECK(absl::IsFailedPrecondition(shard.Resume(1, 3).status()));
  auto resumed = shard.Resume(1, 1);
  CATCH_REQUIRE(resumed.ok());
  CATCH_CHECK(resumed->size() == kSlices);
  CATCH_CHECK(absl::IsFailedPrecondition(shard.Resume(1, 1).status()));  // once
  CATCH_CHECK(Send(shard, 1, 0, 1).ok());
}

CATCH_TEST_CASE("on a 16-bit wire a rejoined worker one version behind gets the encoded previous") {
  ShardOptions o = Options();
  o.wire_dtype = WireDType::kBFloat16;
  ParameterShard shard(o);
  ClusterSignature sig = Signature();
  sig.wire_dtype = WireDType::kBFloat16;
  CATCH_REQUIRE(shard.Join(sig, 0).ok());
  CATCH_REQUIRE(shard.Join(sig, 1).ok());
  std::vector<float> w = {1.01f, 2.02f, 3.03f, 4, 5}, b = {6, 7};
  CATCH_REQUIRE(shard.Init(0, 0, w.data(), 3).ok());
  CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
  CATCH_REQUIRE(shard.Init(0, 2, b.data(), 2).ok());
  // Iteration 0 of every slice; version 1 of slice 0 as it went out.
  std::shared_ptr<const Snapshot> version1;
  for (int s = 0; s < kSlices; ++s) {
    for (int r = 0; r < 2; ++r) {
      const std::vector<float> g = Grad(r, s, 0);
      auto out = shard.Gradient(r, s, 0, g.data(), kLength[s]);
      CATCH_REQUIRE(out.ok());
      if (s == 0 && r == 1) {
        CATCH_REQUIRE(out->size() == 2);
        version1 = (*out)[0].message.values;
        CATCH_CHECK(version1->dtype() == WireDType::kBFloat16);
      }
    }
  }
  CATCH_REQUIRE(version1 != nullptr);
  const Snapshot sent = *version1;
  version1.reset();  // nobody holds it any more: the shard may reuse the buffer
  // Slice 0 moves on to version 2 (and 3 would reuse the buffer of version 1).
  for (int r = 0; r < 2; ++r) {
    const std::vector<float> g = Grad(r, 0, 1);
    CATCH_REQUIRE(shard.Gradient(r, 0, 1, g.data(), kLength[0]).ok());
  }
  CATCH_REQUIRE(shard.SliceValues(0)->second == 2);
  CATCH_REQUIRE(shard.Rejoin(sig, 1).ok());
  absl::StatusOr<std::vector<ToWorker>> resumed = shard.Resume(1, 1);
  CATCH_REQUIRE(resumed.ok());
  CATCH_REQUIRE(resumed->size() == kSlices);
  CATCH_CHECK((*resumed)[0].message.version == 1);
  CATCH_REQUIRE((*resumed)[0].message.values != nullptr);
  CATCH_CHECK((*resumed)[0].message.values->bytes() == sent.bytes());
  CATCH_CHECK((*resumed)[1].message.values != nullptr);  // the others at their current version 1
}

}  // namespace
}  // namespace p3
