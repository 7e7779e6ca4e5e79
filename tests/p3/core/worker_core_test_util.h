// The small plan and worker-core fixture the WorkerCore tests drive.
#ifndef P3_TESTS_P3_CORE_WORKER_CORE_TEST_UTIL_H_
#define P3_TESTS_P3_CORE_WORKER_CORE_TEST_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "p3/core/slice_plan.h"
#include "p3/core/version_tracker.h"
#include "p3/core/worker_core.h"

namespace p3 {
namespace worker_core_test {

// Two tensors over two servers, slices of 4 values:
//   slice 0: a[0,4) server 0, slice 1: a[4,8) server 1, slice 2: a[8,10) server 0,
//   slice 3: b[0,3) server 1.
inline SlicePlan TestPlan() {
  SlicePlanOptions options;
  options.granularity = Granularity::kSliced;
  options.slice_params = 4;
  options.num_servers = 2;
  absl::StatusOr<SlicePlan> plan = SlicePlan::Create({{"a", 10}, {"b", 3}}, options);
  return *plan;
}

// A worker core with its buffers and tracker.
struct Fixture {
  explicit Fixture(int rank = 0, bool values_on_push = true)
      : plan(TestPlan()),
        params(plan.total_params(), -1.0f),
        grads(plan.total_params(), 0.0f),
        tracker(static_cast<int>(plan.slices().size())),
        core({.rank = rank, .num_servers = 2, .values_on_push = values_on_push}, plan,
             params.data(), grads.data(), &tracker) {
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = 100.0f + static_cast<float>(i);
  }

  // Params of `n` values v0, v0+1, ... as the bytes a transport would hand over.
  absl::StatusOr<bool> Part(int server, int64_t slice, uint64_t version, uint64_t offset, int n,
                            float v0) {
    std::vector<float> values(n);
    for (int i = 0; i < n; ++i) values[i] = v0 + static_cast<float>(i);
    std::string bytes(reinterpret_cast<const char*>(values.data()), n * sizeof(float));
    return core.Params(server, slice, version, offset, bytes.data(), bytes.size());
  }

  bool Holds(int slice, uint64_t version) const {
    return tracker.Missing(slice, slice + 1, version) == 0;
  }

  SlicePlan plan;
  std::vector<float> params;
  std::vector<float> grads;
  VersionTracker tracker;
  WorkerCore core;
};

inline bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

}  // namespace worker_core_test
}  // namespace p3

#endif  // P3_TESTS_P3_CORE_WORKER_CORE_TEST_UTIL_H_
