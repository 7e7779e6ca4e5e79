#include "tests/p3/pipeline/engine_test_util.h"

#include <torch/torch.h>

#include <memory>
#include <utility>
#include <vector>

#include "p3/base/status_macros.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {

std::vector<torch::Tensor> Clones(const std::vector<torch::Tensor>& v) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& t : v) out.push_back(t.detach().clone());
  return out;
}

absl::StatusOr<std::pair<std::vector<torch::Tensor>, TrainStats>> RunEngine(
    const PipelineOptions& options, const PipelineEngine::ModelFactory& factory,
    const std::vector<models::Batch>& batches) {
  P3_ASSIGN_OR_RETURN(std::unique_ptr<PipelineEngine> engine,
                      PipelineEngine::Create(options, factory));
  P3_ASSIGN_OR_RETURN(TrainStats stats, engine->Train(batches.size(), SourceOf(batches)));
  return std::make_pair(engine->Parameters(), std::move(stats));
}

}  // namespace p3::pipeline
