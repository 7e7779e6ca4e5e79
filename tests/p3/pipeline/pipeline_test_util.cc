#include "tests/p3/pipeline/pipeline_test_util.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>

#include "absl/strings/str_cat.h"
#include "models/zoo.h"

namespace p3::pipeline {

double MaxAbsDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  CATCH_REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    m = std::max(m, (a[j].detach().cpu() - b[j].detach().cpu()).abs().max().item<double>());
  }
  return m;
}

std::vector<models::Batch> MakeBatches(int64_t count, int64_t batch, std::vector<int64_t> shape,
                                       int64_t classes, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<models::Batch> out;
  shape.insert(shape.begin(), batch);
  for (int64_t i = 0; i < count; ++i) {
    out.push_back({torch::randn(shape), torch::randint(0, classes, {batch}, torch::kLong)});
  }
  return out;
}

PipelineEngine::BatchSource SourceOf(const std::vector<models::Batch>& batches) {
  return [&batches](int64_t i) -> absl::StatusOr<models::Batch> { return batches.at(i); };
}

Chain::Chain(const std::vector<int64_t>& dims) {
  for (size_t b = 0; b + 1 < dims.size(); ++b) {
    auto fc = register_module(absl::StrCat("fc", b), torch::nn::Linear(dims[b], dims[b + 1]));
    const bool last = b + 2 == dims.size();
    AddBlock(absl::StrCat("fc", b), {fc}, [fc, last](const torch::Tensor& x) {
      torch::Tensor y = fc->forward(x);
      return last ? y : torch::tanh(y);
    });
  }
}

PipelineEngine::ModelFactory ChainFactory(std::vector<int64_t> dims, uint64_t seed) {
  return [dims, seed]() -> absl::StatusOr<std::shared_ptr<models::BlockModel>> {
    torch::manual_seed(seed);
    return std::static_pointer_cast<models::BlockModel>(std::make_shared<Chain>(dims));
  };
}

PipelineEngine::ModelFactory ZooFactory(const std::string& name, uint64_t seed) {
  return [name, seed]() -> absl::StatusOr<std::shared_ptr<models::BlockModel>> {
    models::ModelOptions o;
    o.name = name;
    o.seed = seed;
    return models::CreateModel(o);
  };
}

void EventLog::Add(const PipelineEvent& e) {
  absl::MutexLock lock(&mu_);
  events_.push_back(e);
}

std::vector<PipelineEvent> EventLog::events() {
  absl::MutexLock lock(&mu_);
  return events_;
}

std::vector<ScheduleStep> StepsOf(const std::vector<PipelineEvent>& events, int stage) {
  std::vector<ScheduleStep> out;
  for (const PipelineEvent& e : events) {
    if (e.stage == stage) out.push_back({e.pass, e.microbatch});
  }
  return out;
}

}  // namespace p3::pipeline
