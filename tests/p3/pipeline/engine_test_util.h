// What the pipeline engine's tests share (engine_*_test.cc): a whole run of the engine
// and detached copies of parameters.
//
// Example:
//   auto got = RunEngine(options, ChainFactory({5, 6, 4}), MakeBatches(8, 4, {5}, 4, 17));
//   CATCH_REQUIRE(got.ok());
//   CATCH_CHECK(MaxAbsDiff(got->first, want) < 2e-5);   // got->second: the TrainStats
#ifndef TESTS_P3_PIPELINE_ENGINE_TEST_UTIL_H_
#define TESTS_P3_PIPELINE_ENGINE_TEST_UTIL_H_

#include <torch/torch.h>

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/dataset.h"
#include "p3/pipeline/engine.h"

namespace p3::pipeline {

// Detached clones of `v`.
std::vector<torch::Tensor> Clones(const std::vector<torch::Tensor>& v);

// An engine made with `options` and `factory`, trained on every mini-batch of `batches`:
// its parameters and statistics.
absl::StatusOr<std::pair<std::vector<torch::Tensor>, TrainStats>> RunEngine(
    const PipelineOptions& options, const PipelineEngine::ModelFactory& factory,
    const std::vector<models::Batch>& batches);

}  // namespace p3::pipeline

#endif  // TESTS_P3_PIPELINE_ENGINE_TEST_UTIL_H_
