// The server's hot path allocates nothing once a slice's buffers exist: counted with a
// replaced global operator new (//p3/base:allocation_count), which is why this is a test
// binary of its own.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <new>
#include <vector>

#include "p3/base/allocation_count.h"
#include "p3/core/parameter_shard.h"

namespace p3 {
namespace {

constexpr int kWorkers = 3;
constexpr int64_t kParams = 3000;
constexpr int64_t kSliceParams = 1000;

ClusterSignature Signature(bool values_on_push) {
  ClusterSignature sig;
  sig.num_workers = kWorkers;
  sig.num_servers = 1;
  sig.tensors = {{"w", {kParams}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = kSliceParams;
  sig.values_on_push = values_on_push;
  return sig;
}

// Runs iterations [first, last) of every slice, each worker's gradient in one message
// and, without values on push, each worker's pull of the next version; `out` is reused
// and dropped after each message, as the server does once it has queued the messages.
// Returns whether every call succeeded; Catch2's assertions would allocate themselves.
bool RunIterations(ParameterShard& shard, int slices, bool values_on_push, uint64_t first,
                   uint64_t last, const std::vector<float>& grad, std::vector<ToWorker>* out) {
  bool ok = true;
  for (uint64_t it = first; it < last; ++it) {
    for (int s = 0; s < slices; ++s) {
      for (int r = 0; r < kWorkers; ++r) {
        out->clear();
        ok = shard.Gradient(r, s, it, grad.data(), kSliceParams, 0, out).ok() && ok;
        if (!values_on_push) {
          ok = shard.Pull(r, s, it + 1).ok() && ok;
        }
      }
    }
  }
  out->clear();
  return ok;
}

CATCH_TEST_CASE("gradients allocate nothing once the slice's buffers exist") {
  for (bool values_on_push : {true, false}) {
    for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
      CATCH_CAPTURE(values_on_push, static_cast<int>(kind));
      ShardOptions o;
      o.num_workers = kWorkers;
      o.optimizer.kind = kind;
      ParameterShard shard(o);
      for (int r = 0; r < kWorkers; ++r)
        CATCH_REQUIRE(shard.Join(Signature(values_on_push), r).ok());
      const int slices = static_cast<int>(kParams / kSliceParams);
      const std::vector<float> init(kSliceParams, 1.0f);
      for (int s = 0; s < slices; ++s) {
        CATCH_REQUIRE(shard.Init(0, s, init.data(), kSliceParams).ok());
      }
      const std::vector<float> grad(kSliceParams, 0.5f);
      std::vector<ToWorker> out;
      out.reserve(2 * kWorkers);
      // Warm-up: gradient buffers, optimizer state, the spare snapshot.
      CATCH_REQUIRE(RunIterations(shard, slices, values_on_push, 0, 2, grad, &out));
      const int64_t before = p3::AllocationCount();
      const bool ok = RunIterations(shard, slices, values_on_push, 2, 12, grad, &out);
      const int64_t during = p3::AllocationCount() - before;
      CATCH_REQUIRE(ok);
      // Without values on push, the last worker's pull of each slice finds the new version
      // already there and gets it in Pull's own result vector: one allocation per slice
      // and iteration, outside the gradient path. Nothing else allocates.
      CATCH_CHECK(during == (values_on_push ? 0 : 10 * slices));
      CATCH_CHECK(shard.SliceValues(0)->second == 12);
    }
  }
}

}  // namespace
}  // namespace p3
