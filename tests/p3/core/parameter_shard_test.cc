// The server's state machine, driven directly: no transport. Its aggregation and update
// (joins, initial values, gradients, pulls, snapshots); the 16-bit wire, re-plans and
// rejoins have tests of their own (shard_wire_dtype_test, shard_replan_test,
// shard_rejoin_test).
#include "p3/core/parameter_shard.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "p3/core/optimizer.h"
#include "tests/p3/core/shard_test_util.h"

namespace p3 {
namespace {

using shard_test::InitAll;
using shard_test::Options;
using shard_test::Signature;

CATCH_TEST_CASE("initial values go to every worker once all slices are in") {
  ParameterShard shard(Options(2));
  CATCH_REQUIRE(shard.Join(Signature(2), 0).ok());
  std::vector<float> w = {1, 2, 3, 4, 5}, b = {6, 7};
  auto a = shard.Init(0, 0, w.data(), 3);
  CATCH_REQUIRE(a.ok());
  CATCH_CHECK(a->empty());
  CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
  auto last = shard.Init(0, 2, b.data(), 2);
  CATCH_REQUIRE(last.ok());
  CATCH_CHECK(last->size() == 3);  // three slices to worker 0, the only one joined
  // A worker joining later gets version 0 of every slice at once.
  auto late = shard.Join(Signature(2), 1);
  CATCH_REQUIRE(late.ok());
  CATCH_REQUIRE(late->size() == 3);
  CATCH_CHECK((*late)[0].rank == 1);
  CATCH_CHECK((*late)[0].message.version == 0);
  CATCH_CHECK(DecodedValues((*late)[0].message) == std::vector<float>{1, 2, 3});
}

CATCH_TEST_CASE("the mean of all workers' gradients is applied once the last one is in") {
  ParameterShard shard(Options(3, 0.5));
  for (int r = 0; r < 3; ++r) CATCH_REQUIRE(shard.Join(Signature(3), r).ok());
  InitAll(shard);
  std::vector<float> g0 = {1, 1, 1}, g1 = {2, 2, 2}, g2 = {6, 0, 3};
  auto o0 = shard.Gradient(0, 0, 0, g0.data(), 3);
  auto o2 = shard.Gradient(2, 0, 0, g2.data(), 3);
  CATCH_REQUIRE(o0.ok());
  CATCH_REQUIRE(o2.ok());
  CATCH_CHECK(o0->empty());
  CATCH_CHECK(o2->empty());
  auto o1 = shard.Gradient(1, 0, 0, g1.data(), 3);
  CATCH_REQUIRE(o1.ok());
  CATCH_REQUIRE(o1->size() == 3);  // version 1 to every worker
  // mean = {3, 1, 2}; p = {1,2,3} - 0.5*mean
  std::vector<float> want = {-0.5f, 1.5f, 2.0f};
  for (const ToWorker& o : *o1) {
    CATCH_CHECK(o.message.kind == Downstream::Kind::kParams);
    CATCH_CHECK(o.message.version == 1);
    CATCH_CHECK(DecodedValues(o.message) == want);
  }
  auto values = shard.SliceValues(0);
  CATCH_REQUIRE(values.ok());
  CATCH_CHECK(values->second == 1);
  // The other slices are untouched.
  CATCH_CHECK(shard.SliceValues(1)->second == 0);
}

CATCH_TEST_CASE("the result does not depend on the order gradients arrive in") {
  std::vector<float> g[3] = {{0.1f, 0.7f, 1e-8f}, {3e7f, -0.3f, 1.0f}, {-3e7f, 0.2f, 1.0f}};
  std::vector<std::vector<float>> results;
  for (auto order : {std::vector<int>{0, 1, 2}, {2, 1, 0}, {1, 2, 0}}) {
    ParameterShard shard(Options(3));
    for (int r = 0; r < 3; ++r) CATCH_REQUIRE(shard.Join(Signature(3), r).ok());
    InitAll(shard);
    for (int r : order) CATCH_REQUIRE(shard.Gradient(r, 0, 0, g[r].data(), 3).ok());
    results.push_back(shard.SliceValues(0)->first);
  }
  CATCH_CHECK(results[0] == results[1]);
  CATCH_CHECK(results[0] == results[2]);
}

CATCH_TEST_CASE(
    "gradients in parts from any number of workers, interleaved in any order, update as "
    "the mean summed in rank order") {
  // Values whose float sum depends on its order.
  const float pool[] = {0.1f, 3e7f, -3e7f, 1e-8f, 0.7f, -0.3f, 1.0f, 2.5e-3f, -7.0f};
  std::mt19937 rng(7);
  for (int workers = 1; workers <= 4; ++workers) {
    for (int trial = 0; trial < 40; ++trial) {
      ShardOptions options = Options(workers, 0.5);
      options.optimizer.momentum = 0.9;
      options.optimizer.weight_decay = 0.01;
      ParameterShard shard(options);
      for (int r = 0; r < workers; ++r) CATCH_REQUIRE(shard.Join(Signature(workers), r).ok());
      InitAll(shard);
      // The reference: SliceOptimizer on whole gradients of slice 0 (3 values).
      SliceOptimizer reference(options.optimizer);
      SliceOptimizerState state;
      std::vector<float> want = {1, 2, 3};
      for (uint64_t it = 0; it < 3; ++it) {
        std::vector<std::vector<float>> g(workers);
        for (auto& v : g) {
          for (int i = 0; i < 3; ++i) v.push_back(pool[rng() % 9]);
        }
        std::vector<const float*> ptrs;
        for (const auto& v : g) ptrs.push_back(v.data());
        reference.ApplyMean(want.data(), ptrs.data(), workers, 3, &state);
        // Each worker's gradient cut into parts of 1 - 3 values; the parts of all
        // workers interleaved at random, each worker's in its own order.
        std::vector<std::pair<int, int64_t>> sends;  // (rank, part length)
        for (int r = 0; r < workers; ++r) {
          for (int64_t at = 0; at < 3;) {
            const int64_t len = std::min<int64_t>(3 - at, 1 + rng() % 3);
            sends.push_back({r, len});
            at += len;
          }
        }
        std::shuffle(sends.begin(), sends.end(), rng);
        std::vector<int64_t> at(workers, 0);
        for (const auto& [r, len] : sends) {
          CATCH_REQUIRE(shard.Gradient(r, 0, it, g[r].data() + at[r], len, at[r]).ok());
          at[r] += len;
        }
        CATCH_REQUIRE(shard.SliceValues(0)->second == it + 1);
      }
      CATCH_CHECK(shard.SliceValues(0)->first == want);
    }
  }
}

CATCH_TEST_CASE("malformed gradients are refused and change nothing") {
  ParameterShard shard(Options(2));
  CATCH_REQUIRE(shard.Join(Signature(2), 0).ok());
  CATCH_REQUIRE(shard.Join(Signature(2), 1).ok());
  InitAll(shard);
  std::vector<float> g = {1, 1, 1, 1};
  CATCH_CHECK(
      absl::IsInvalidArgument(shard.Gradient(0, 9, 0, g.data(), 3).status()));  // unknown slice
  CATCH_CHECK(
      absl::IsInvalidArgument(shard.Gradient(0, 0, 0, g.data(), 4).status()));  // wrong length
  CATCH_CHECK(
      absl::IsInvalidArgument(shard.Gradient(0, 0, 1, g.data(), 3).status()));  // wrong iteration
  CATCH_REQUIRE(shard.Gradient(0, 0, 0, g.data(), 3).ok());
  CATCH_CHECK(absl::IsAlreadyExists(shard.Gradient(0, 0, 0, g.data(), 3).status()));  // duplicate
  CATCH_CHECK(
      absl::IsFailedPrecondition(shard.Gradient(5, 0, 0, g.data(), 3).status()));  // no such worker
  CATCH_CHECK(
      absl::IsInvalidArgument(shard.Init(1, 0, g.data(), 3).status()));  // init not from rank 0
  CATCH_CHECK(absl::IsAlreadyExists(shard.Init(0, 0, g.data(), 3).status()));
  // The slice still completes normally with worker 1's gradient.
  auto done = shard.Gradient(1, 0, 0, g.data(), 3);
  CATCH_REQUIRE(done.ok());
  CATCH_CHECK(done->size() == 2);
  CATCH_CHECK(shard.SliceValues(0)->second == 1);
}

CATCH_TEST_CASE("a slice sent in parts gives the same result as sent whole") {
  std::vector<float> g0 = {0.25f, -1.5f, 3.0f}, g1 = {2.0f, 0.5f, -0.125f};
  ParameterShard whole(Options(2, 0.5)), parts(Options(2, 0.5));
  for (ParameterShard* shard : {&whole, &parts}) {
    for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard->Join(Signature(2), r).ok());
  }
  InitAll(whole);
  // Initial values of slice 0 in two parts: nothing goes out before the last one.
  std::vector<float> w = {1, 2, 3, 4, 5}, b = {6, 7};
  auto first = parts.Init(0, 0, w.data(), 1, /*offset=*/0);
  CATCH_REQUIRE(first.ok());
  CATCH_CHECK(first->empty());
  CATCH_REQUIRE(parts.Init(0, 0, w.data() + 1, 2, /*offset=*/1).ok());
  CATCH_REQUIRE(parts.Init(0, 1, w.data() + 3, 2).ok());
  CATCH_REQUIRE(parts.Init(0, 2, b.data(), 2).ok());
  CATCH_CHECK(parts.SliceValues(0)->first == whole.SliceValues(0)->first);

  CATCH_REQUIRE(whole.Gradient(0, 0, 0, g0.data(), 3).ok());
  CATCH_REQUIRE(whole.Gradient(1, 0, 0, g1.data(), 3).ok());
  // Rank 0 in three parts, rank 1 whole; the update waits for rank 0's last part.
  CATCH_REQUIRE(parts.Gradient(0, 0, 0, g0.data(), 1, 0).ok());
  CATCH_REQUIRE(parts.Gradient(1, 0, 0, g1.data(), 3).ok());
  CATCH_REQUIRE(parts.Gradient(0, 0, 0, g0.data() + 1, 1, 1).ok());
  CATCH_CHECK(parts.SliceValues(0)->second == 0);
  auto last = parts.Gradient(0, 0, 0, g0.data() + 2, 1, 2);
  CATCH_REQUIRE(last.ok());
  CATCH_CHECK(last->size() == 2);  // version 1 to both workers
  CATCH_CHECK(parts.SliceValues(0)->second == 1);
  CATCH_CHECK(parts.SliceValues(0)->first == whole.SliceValues(0)->first);
}

CATCH_TEST_CASE("values as bytes cut anywhere, or in shared memory, count as float values do") {
  std::vector<float> g0 = {0.25f, -1.5f, 3.0f}, g1 = {2.0f, 0.5f, -0.125f};
  std::vector<float> w = {1, 2, 3, 4, 5}, b = {6, 7};
  ParameterShard floats(Options(2, 0.5)), bytes(Options(2, 0.5)), shared(Options(2, 0.5));
  for (ParameterShard* shard : {&floats, &bytes, &shared}) {
    for (int r = 0; r < 2; ++r) CATCH_REQUIRE(shard->Join(Signature(2), r).ok());
  }
  InitAll(floats);
  // Initial values of slice 0 as bytes cut inside a value, then slices 1 and 2.
  const std::string raw(reinterpret_cast<const char*>(w.data()), 3 * sizeof(float));
  const std::vector<absl::string_view> cut = {absl::string_view(raw).substr(0, 5),
                                              absl::string_view(raw).substr(5)};
  CATCH_REQUIRE(bytes.Init(0, 0, cut, 0).ok());
  CATCH_REQUIRE(bytes.Init(0, 1, w.data() + 3, 2).ok());
  CATCH_REQUIRE(bytes.Init(0, 2, b.data(), 2).ok());
  // The same from a colocated worker's flat parameters: slice 1 at its place [3, 5).
  const std::vector<float> flat_params = {1, 2, 3, 4, 5, 6, 7};
  const SharedValues memory{.params = flat_params.data(), .grads = nullptr};
  CATCH_REQUIRE(shared.Init(0, 0, memory, 3, 0).ok());
  CATCH_REQUIRE(shared.Init(0, 1, memory, 1, 0).ok());
  CATCH_REQUIRE(shared.Init(0, 1, memory, 1, 1).ok());
  CATCH_REQUIRE(shared.Init(0, 2, memory, 2, 0).ok());
  for (int slice = 0; slice < 3; ++slice) {
    CATCH_CHECK(bytes.SliceValues(slice)->first == floats.SliceValues(slice)->first);
    CATCH_CHECK(shared.SliceValues(slice)->first == floats.SliceValues(slice)->first);
  }
  // Gradients of slice 0: rank 0's bytes in three pieces, rank 1's in shared memory.
  std::vector<float> flat_grads(7, 0.0f);
  std::copy(g1.begin(), g1.end(), flat_grads.begin());
  const SharedValues grads{.params = nullptr, .grads = flat_grads.data()};
  const std::string g0_raw(reinterpret_cast<const char*>(g0.data()), 3 * sizeof(float));
  const std::vector<absl::string_view> pieces = {absl::string_view(g0_raw).substr(0, 1),
                                                 absl::string_view(g0_raw).substr(1, 9),
                                                 absl::string_view(g0_raw).substr(10)};
  std::vector<ToWorker> out;
  CATCH_REQUIRE(floats.Gradient(0, 0, 0, g0.data(), 3).ok());
  CATCH_REQUIRE(floats.Gradient(1, 0, 0, g1.data(), 3).ok());
  for (ParameterShard* shard : {&bytes, &shared}) {
    CATCH_REQUIRE(shard->Gradient(0, 0, 0, pieces, 0, &out).ok());
    CATCH_REQUIRE(shard->Gradient(1, 0, 0, grads, 3, 0, &out).ok());
    CATCH_CHECK(shard->SliceValues(0)->second == 1);
    CATCH_CHECK(shard->SliceValues(0)->first == floats.SliceValues(0)->first);
  }
  // Bytes that are not whole values are refused naming the slice, and change nothing.
  const std::vector<absl::string_view> odd = {absl::string_view(g0_raw).substr(0, 7)};
  absl::Status refused = bytes.Gradient(0, 1, 0, odd, 0, &out);
  CATCH_CHECK(absl::IsInvalidArgument(refused));
  CATCH_CHECK(refused.message() ==
              "gradient of slice 1: 7 bytes, not a whole number of float32 values (4 bytes each)");
  ParameterShard fresh(Options(1));
  CATCH_REQUIRE(fresh.Join(Signature(1), 0).ok());
  CATCH_CHECK(fresh.Init(0, 0, odd, 0).status().message() ==
              "initial values of slice 0: 7 bytes, not a whole number of float32 values (4 bytes "
              "each)");
  // A part in shared memory past its slice is refused before anything is read.
  CATCH_CHECK(absl::IsInvalidArgument(shared.Gradient(0, 1, 0, grads, 2, 1, &out)));
  CATCH_CHECK(shared.SliceValues(1)->second == 0);
}

CATCH_TEST_CASE("parts out of order, overlapping or past the end are refused and change nothing") {
  ParameterShard shard(Options(1));
  CATCH_REQUIRE(shard.Join(Signature(1), 0).ok());
  InitAll(shard);
  std::vector<float> g = {1, 1, 1, 1};
  CATCH_CHECK(absl::IsInvalidArgument(shard.Gradient(0, 0, 0, g.data(), 1, 1).status()));  // gap
  CATCH_REQUIRE(shard.Gradient(0, 0, 0, g.data(), 2, 0).ok());
  CATCH_CHECK(
      absl::IsInvalidArgument(shard.Gradient(0, 0, 0, g.data(), 1, 0).status()));  // overlap
  CATCH_CHECK(
      absl::IsInvalidArgument(shard.Gradient(0, 0, 0, g.data(), 2, 2).status()));  // past end
  CATCH_CHECK(absl::IsInvalidArgument(shard.Gradient(0, 0, 0, g.data(), 0, 2).status()));  // empty
  CATCH_CHECK(absl::IsInvalidArgument(shard.Gradient(0, 0, 0, g.data(), 1, -1).status()));
  CATCH_CHECK(shard.SliceValues(0)->second == 0);
  // The right part still completes the slice.
  auto done = shard.Gradient(0, 0, 0, g.data(), 1, 2);
  CATCH_REQUIRE(done.ok());
  CATCH_CHECK(shard.SliceValues(0)->second == 1);
}

CATCH_TEST_CASE("a handshake that does not fit is refused with a clear reason") {
  ParameterShard shard(Options(2));
  CATCH_REQUIRE(shard.Join(Signature(2), 0).ok());
  ClusterSignature other = Signature(2);
  other.tensors[0].shape = {6};
  auto bad_shape = shard.Join(other, 1);
  CATCH_REQUIRE(absl::IsFailedPrecondition(bad_shape.status()));
  CATCH_CHECK(bad_shape.status().message().find("shape [6], expected [5]") != std::string::npos);
  CATCH_CHECK(absl::IsFailedPrecondition(shard.Join(Signature(3), 1).status()));  // cluster size
  CATCH_CHECK(absl::IsInvalidArgument(shard.Join(Signature(2), 2).status()));     // rank range
  CATCH_CHECK(absl::IsAlreadyExists(shard.Join(Signature(2), 0).status()));       // twice
  ClusterSignature sliced_differently = Signature(2);
  sliced_differently.plan.slice_params = 4;
  CATCH_CHECK(absl::IsFailedPrecondition(shard.Join(sliced_differently, 1).status()));
  CATCH_CHECK(shard.Join(Signature(2), 1).ok());  // the right one is still admitted
}

CATCH_TEST_CASE("without values on push the server acks and answers pulls once updated") {
  ParameterShard shard(Options(2));
  CATCH_REQUIRE(shard.Join(Signature(2, false), 0).ok());
  CATCH_REQUIRE(shard.Join(Signature(2, false), 1).ok());
  InitAll(shard);
  std::vector<float> g = {1, 1, 1};
  auto a0 = shard.Gradient(0, 0, 0, g.data(), 3);
  CATCH_REQUIRE(a0.ok());
  CATCH_REQUIRE(a0->size() == 1);
  CATCH_CHECK((*a0)[0].message.kind == Downstream::Kind::kAck);
  auto pull0 = shard.Pull(0, 0, 1);  // not updated yet: parked
  CATCH_REQUIRE(pull0.ok());
  CATCH_CHECK(pull0->empty());
  auto a1 = shard.Gradient(1, 0, 0, g.data(), 3);
  CATCH_REQUIRE(a1.ok());
  CATCH_REQUIRE(a1->size() == 2);  // ack to 1, parked pull of 0 answered
  CATCH_CHECK((*a1)[0].message.kind == Downstream::Kind::kAck);
  CATCH_CHECK((*a1)[1].message.kind == Downstream::Kind::kParams);
  CATCH_CHECK((*a1)[1].rank == 0);
  auto pull1 = shard.Pull(1, 0, 1);  // already updated: answered at once
  CATCH_REQUIRE(pull1.ok());
  CATCH_REQUIRE(pull1->size() == 1);
  CATCH_CHECK((*pull1)[0].message.version == 1);
  CATCH_CHECK(absl::IsInvalidArgument(shard.Pull(1, 0, 7).status()));
}

CATCH_TEST_CASE("values already handed out stay unchanged while later versions are computed") {
  ParameterShard shard(Options(1, 1.0));
  CATCH_REQUIRE(shard.Join(Signature(1), 0).ok());
  InitAll(shard);
  std::vector<float> g = {1, 1, 1};
  // Version 1 is held (an outgoing message not sent yet) while versions 2 and 3 are
  // computed: the shard must not reuse its buffer. Version 2 is dropped at once, so its
  // buffer may be reused for version 4.
  auto v1 = shard.Gradient(0, 0, 0, g.data(), 3);
  CATCH_REQUIRE(v1.ok());
  CATCH_REQUIRE(v1->size() == 1);
  const std::shared_ptr<const Snapshot> held = (*v1)[0].message.values;
  for (uint64_t it = 1; it < 4; ++it) {
    auto out = shard.Gradient(0, 0, it, g.data(), 3);
    CATCH_REQUIRE(out.ok());
    CATCH_REQUIRE(out->size() == 1);
    CATCH_CHECK(DecodedValues((*out)[0].message) ==
                std::vector<float>{1.0f - (it + 1), 2.0f - (it + 1), 3.0f - (it + 1)});
  }
  CATCH_CHECK(held->Decoded() == std::vector<float>{0, 1, 2});
  CATCH_CHECK(shard.SliceValues(0)->first == std::vector<float>{-3, -2, -1});
}

CATCH_TEST_CASE("the server is finished when every worker is") {
  ParameterShard shard(Options(2));
  CATCH_REQUIRE(shard.Join(Signature(2), 0).ok());
  CATCH_REQUIRE(shard.Join(Signature(2), 1).ok());
  CATCH_CHECK_FALSE(shard.Finish(1));
  CATCH_CHECK(shard.Finish(0));
}

CATCH_TEST_CASE("each update uses the scheduled rate of its iteration, also after a restore") {
  // Plain SGD with rate 1, then 0.5 from iteration 2 on (step schedule): gradient 1 on
  // every value moves it by -1, -1, -0.5, -0.5.
  ShardOptions o = Options(1);
  o.optimizer.schedule.kind = LrScheduleKind::kStep;
  o.optimizer.schedule.step_size = 2;
  o.optimizer.schedule.gamma = 0.5;
  o.checkpoint_every = 2;
  std::optional<ShardCheckpoint> saved;
  o.on_checkpoint = [&saved](ShardCheckpoint c) {
    if (!saved) saved = std::move(c);  // the one of iteration 2
  };
  const std::vector<float> ones = {1, 1, 1};
  const std::vector<float> want = {-2.0f, -1.0f, 0.0f};  // {1, 2, 3} - 3
  {
    ParameterShard shard(o);
    CATCH_REQUIRE(shard.Join(Signature(1), 0).ok());
    InitAll(shard);
    for (uint64_t it = 0; it < 4; ++it) {
      for (int slice = 0; slice < 3; ++slice) {
        const int64_t n = slice == 0 ? 3 : 2;
        CATCH_REQUIRE(shard.Gradient(0, slice, it, ones.data(), n).ok());
      }
    }
    CATCH_CHECK(shard.SliceValues(0)->first == want);
  }
  // A new shard restored at iteration 2 continues at the rate of iteration 2.
  CATCH_REQUIRE(saved.has_value());
  CATCH_REQUIRE(saved->iteration == 2);
  o.on_checkpoint = nullptr;
  o.checkpoint_every = 0;
  o.restore = *saved;
  ParameterShard restored(o);
  CATCH_REQUIRE(restored.Join(Signature(1), 0).ok());
  for (uint64_t it = 2; it < 4; ++it) {
    for (int slice = 0; slice < 3; ++slice) {
      const int64_t n = slice == 0 ? 3 : 2;
      CATCH_REQUIRE(restored.Gradient(0, slice, it, ones.data(), n).ok());
    }
  }
  CATCH_CHECK(restored.SliceValues(0)->first == want);
}

CATCH_TEST_CASE("a worker joining while the last initial values arrive gets version 0 once") {
  // Join and the last Init race on two threads; whichever wins, worker 1 must receive
  // version 0 of every slice exactly once (from its Join or from the Init), never twice.
  for (int round = 0; round < 300; ++round) {
    ParameterShard shard(Options(2));
    CATCH_REQUIRE(shard.Join(Signature(2), 0).ok());
    std::vector<float> w = {1, 2, 3, 4, 5}, b = {6, 7};
    CATCH_REQUIRE(shard.Init(0, 0, w.data(), 3).ok());
    CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
    absl::StatusOr<std::vector<ToWorker>> from_init;
    absl::StatusOr<std::vector<ToWorker>> from_join;
    std::thread init([&] { from_init = shard.Init(0, 2, b.data(), 2); });
    std::thread join([&] { from_join = shard.Join(Signature(2), 1); });
    init.join();
    join.join();
    CATCH_REQUIRE(from_init.ok());
    CATCH_REQUIRE(from_join.ok());
    int to_worker_1 = 0;
    for (const auto* out : {&*from_init, &*from_join}) {
      for (const ToWorker& o : *out) to_worker_1 += o.rank == 1;
    }
    CATCH_REQUIRE(to_worker_1 == 3);
  }
}

CATCH_TEST_CASE("without values the shard runs the same protocol: who gets what, when") {
  // The simulator's shard (ShardOptions::keep_values = false) against one with values,
  // message by message, in both answer styles.
  for (bool values_on_push : {true, false}) {
    ShardOptions with = Options(2);
    ShardOptions without = Options(2);
    without.keep_values = false;
    ParameterShard a(with), b(without);
    for (int r = 0; r < 2; ++r) {
      CATCH_REQUIRE(a.Join(Signature(2, values_on_push), r).ok());
      CATCH_REQUIRE(b.Join(Signature(2, values_on_push), r).ok());
    }
    InitAll(a);
    CATCH_REQUIRE(b.Init(0, 0, nullptr, 3).ok());
    CATCH_REQUIRE(b.Init(0, 1, nullptr, 2).ok());
    absl::StatusOr<std::vector<ToWorker>> init_b = b.Init(0, 2, nullptr, 2);
    CATCH_REQUIRE(init_b.ok());
    CATCH_CHECK(init_b->size() == 6);  // version 0 of 3 slices to 2 workers
    std::vector<float> g = {1, 1, 1};
    auto same = [](const std::vector<ToWorker>& x, const std::vector<ToWorker>& y) {
      CATCH_REQUIRE(x.size() == y.size());
      for (size_t i = 0; i < x.size(); ++i) {
        CATCH_CHECK(x[i].message.kind == y[i].message.kind);
        CATCH_CHECK(x[i].rank == y[i].rank);
        CATCH_CHECK(x[i].message.slice_id == y[i].message.slice_id);
        CATCH_CHECK(x[i].message.version == y[i].message.version);
        CATCH_CHECK(x[i].message.iteration == y[i].message.iteration);
        CATCH_CHECK(x[i].bytes == y[i].bytes);
        CATCH_CHECK(y[i].message.values == nullptr);
      }
    };
    for (int r = 0; r < 2; ++r) {
      if (!values_on_push && r == 1) {
        // Worker 0 pulls version 1 before worker 1's gradient: pending in both.
        absl::StatusOr<std::vector<ToWorker>> pa = a.Pull(0, 0, 1), pb = b.Pull(0, 0, 1);
        CATCH_REQUIRE(pa.ok());
        CATCH_REQUIRE(pb.ok());
        same(*pa, *pb);
      }
      absl::StatusOr<std::vector<ToWorker>> ga = a.Gradient(r, 0, 0, g.data(), 3);
      absl::StatusOr<std::vector<ToWorker>> gb = b.Gradient(r, 0, 0, nullptr, 3);
      CATCH_REQUIRE(ga.ok());
      CATCH_REQUIRE(gb.ok());
      same(*ga, *gb);
      if (r == 1) CATCH_CHECK(!gb->empty());
    }
    CATCH_CHECK(b.SliceValues(0)->second == 1);
    // A duplicate is refused the same way.
    CATCH_CHECK(b.Gradient(0, 0, 0, nullptr, 3).status().code() ==
                a.Gradient(0, 0, 0, g.data(), 3).status().code());
  }
}

}  // namespace
}  // namespace p3
