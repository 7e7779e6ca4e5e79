// The small cluster most shard tests drive: one server, two tensors in three slices.
#ifndef P3_TESTS_P3_CORE_SHARD_TEST_UTIL_H_
#define P3_TESTS_P3_CORE_SHARD_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <vector>

#include "p3/core/parameter_shard.h"

namespace p3 {
namespace shard_test {

// Two tensors: "w" (5 params) and "b" (2), slices of 3 params, one server:
// slices 0:[0,3) 1:[3,5) of w, 2:[5,7) b.
inline ClusterSignature Signature(int workers, bool values_on_push = true) {
  ClusterSignature sig;
  sig.num_workers = workers;
  sig.num_servers = 1;
  sig.tensors = {{"w", {5}, "float32"}, {"b", {2}, "float32"}};
  sig.plan.granularity = Granularity::kSliced;
  sig.plan.slice_params = 3;
  sig.values_on_push = values_on_push;
  return sig;
}

inline ShardOptions Options(int workers, double lr = 1.0) {
  ShardOptions o;
  o.num_workers = workers;
  o.optimizer.lr = lr;
  o.optimizer.momentum = 0;
  return o;
}

// Rank 0's initial values of the three slices: w = 1..5, b = 6, 7.
inline void InitAll(ParameterShard& shard) {
  std::vector<float> w = {1, 2, 3, 4, 5}, b = {6, 7};
  CATCH_REQUIRE(shard.Init(0, 0, w.data(), 3).ok());
  CATCH_REQUIRE(shard.Init(0, 1, w.data() + 3, 2).ok());
  CATCH_REQUIRE(shard.Init(0, 2, b.data(), 2).ok());
}

}  // namespace shard_test
}  // namespace p3

#endif  // P3_TESTS_P3_CORE_SHARD_TEST_UTIL_H_
