// What the pipeline engine's tests share: synthetic mini-batches, small block models and
// their factories, a comparison of parameter lists, and a thread-safe record of the
// events the stages report.
//
// Example:
//   const std::vector<models::Batch> batches = MakeBatches(8, 4, {5}, 4, /*seed=*/41);
//   EventLog log;
//   options.on_event = [&log](const PipelineEvent& e) { log.Add(e); };
//   ... PipelineEngine::Create(options, ChainFactory({5, 6, 4})) ... Train(8, SourceOf(batches))
//   CATCH_CHECK(ScheduleString(StepsOf(log.events(), 0)) == ...);
#ifndef TESTS_P3_PIPELINE_PIPELINE_TEST_UTIL_H_
#define TESTS_P3_PIPELINE_PIPELINE_TEST_UTIL_H_

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "models/block_list_model.h"
#include "models/dataset.h"
#include "p3/pipeline/engine.h"
#include "p3/pipeline/schedule.h"

namespace p3::pipeline {

// The largest absolute difference between two lists of tensors of the same shapes
// (a Catch2 REQUIRE fails when the lists differ in length).
double MaxAbsDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b);

// Deterministic synthetic mini-batches: input [batch, ...shape], labels in 0..classes-1.
std::vector<models::Batch> MakeBatches(int64_t count, int64_t batch, std::vector<int64_t> shape,
                                       int64_t classes, uint64_t seed);

// Mini-batch i of `batches`, which must outlive the source.
PipelineEngine::BatchSource SourceOf(const std::vector<models::Batch>& batches);

// Blocks: Linear(d0, d1) + tanh, ..., Linear(d_{n-1}, d_n) (no tanh on the last).
class Chain : public models::BlockListModel {
 public:
  explicit Chain(const std::vector<int64_t>& dims);
};

// Identically initialised Chains (torch::manual_seed(seed) before each).
PipelineEngine::ModelFactory ChainFactory(std::vector<int64_t> dims, uint64_t seed = 3);
// Identically initialised zoo models (models/zoo.h) called `name`.
PipelineEngine::ModelFactory ZooFactory(const std::string& name, uint64_t seed = 5);

// The events of a run, recorded from the stage threads. Thread-safe.
class EventLog {
 public:
  void Add(const PipelineEvent& e);
  std::vector<PipelineEvent> events();

 private:
  absl::Mutex mu_;
  std::vector<PipelineEvent> events_ ABSL_GUARDED_BY(mu_);
};

// Stage `stage`'s passes in the order it reported them.
std::vector<ScheduleStep> StepsOf(const std::vector<PipelineEvent>& events, int stage);

}  // namespace p3::pipeline

#endif  // TESTS_P3_PIPELINE_PIPELINE_TEST_UTIL_H_
