// The block profiler (p3/pipeline/profile.h): every block timed, its parameters and
// output counted, the update timed on copies of the weights.
#include "p3/pipeline/profile.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "models/block_list_model.h"
#include "p3/pipeline/stage_sgd.h"
#include "tests/p3/pipeline/pipeline_test_util.h"

namespace p3::pipeline {
namespace {

using models::Batch;
using models::BlockModel;

CATCH_TEST_CASE("the profiler times every block and counts its parameters") {
  absl::StatusOr<std::shared_ptr<BlockModel>> model = ZooFactory("mlp")();
  CATCH_REQUIRE(model.ok());
  const std::vector<Batch> batches = MakeBatches(3, 8, {12}, 10, 59);
  absl::StatusOr<std::vector<BlockProfile>> profile = ProfileBlocks(**model, batches);
  CATCH_REQUIRE(profile.ok());
  CATCH_REQUIRE(profile->size() == 3);
  CATCH_CHECK((*profile)[0].name == "fc1");
  CATCH_CHECK((*profile)[0].parameters == 12 * 40 + 40);
  CATCH_CHECK((*profile)[1].output_bytes == static_cast<int64_t>(8 * 30 * sizeof(float)));
  for (const BlockProfile& b : *profile) {
    CATCH_CHECK(b.forward_seconds > 0);
    CATCH_CHECK(b.backward_seconds > 0);
    CATCH_CHECK(b.update_seconds == 0);  // no SGD options: the update is not profiled
  }
  CATCH_CHECK_FALSE(ProfileBlocks(**model, {batches[0]}).ok());
  // With the stages' SGD options each block's update is timed, on copies of the weights.
  std::vector<torch::Tensor> before;
  for (const torch::Tensor& p : (*model)->parameters()) before.push_back(p.detach().clone());
  const SgdOptions sgd{0.05, 0.9, 0, 1e-4, false};
  profile = ProfileBlocks(**model, batches, &sgd);
  CATCH_REQUIRE(profile.ok());
  for (const BlockProfile& b : *profile) {
    CATCH_CHECK(b.update_seconds > 0);
    CATCH_CHECK(b.seconds() == b.forward_seconds + b.backward_seconds + b.update_seconds);
  }
  std::vector<torch::Tensor> after;
  for (const torch::Tensor& p : (*model)->parameters()) after.push_back(p.detach().clone());
  CATCH_CHECK(MaxAbsDiff(before, after) == 0);  // the model's weights are untouched
}

}  // namespace
}  // namespace p3::pipeline
