// Checks shared by the model tests. Include <torch/torch.h> and catch2 before this header.
#ifndef P3_TESTS_MODELS_TEST_UTIL_H_
#define P3_TESTS_MODELS_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "models/zoo.h"

namespace p3::models::testing {

inline std::shared_ptr<BlockModel> Create(const ModelOptions& options) {
  absl::StatusOr<std::shared_ptr<BlockModel>> model = CreateModel(options);
  CATCH_INFO(options.name << ": " << model.status().ToString());
  CATCH_REQUIRE(model.ok());
  return *model;
}

inline int64_t CountParameters(BlockModel& model) {
  int64_t n = 0;
  for (const torch::Tensor& p : model.parameters()) n += p.numel();
  return n;
}

// Every parameter belongs to exactly one block, and blocks list them in parameters() order.
inline void CheckBlocksPartitionParameters(BlockModel& model) {
  std::vector<torch::Tensor> all = model.parameters();
  std::vector<const void*> from_blocks;
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    for (const torch::Tensor& p : model.BlockParameters(i)) from_blocks.push_back(p.data_ptr());
  }
  CATCH_REQUIRE(from_blocks.size() == all.size());
  bool same_order = true;
  for (size_t i = 0; i < all.size(); ++i) {
    same_order = same_order && from_blocks[i] == all[i].data_ptr();
  }
  CATCH_CHECK(same_order);
  std::set<const void*> unique(from_blocks.begin(), from_blocks.end());
  CATCH_CHECK(unique.size() == from_blocks.size());
}

inline std::vector<std::string> BlockNames(BlockModel& model) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < model.num_blocks(); ++i) names.push_back(model.BlockName(i));
  return names;
}

// Runs the blocks one by one, then Loss and backward; every parameter gets a gradient.
inline torch::Tensor TrainStepThroughBlocks(BlockModel& model, const torch::Tensor& input,
                                            const torch::Tensor& target) {
  model.zero_grad();
  torch::Tensor x = input;
  for (int64_t i = 0; i < model.num_blocks(); ++i) x = model.ForwardBlock(i, x);
  torch::Tensor loss = model.Loss(x, target);
  CATCH_CHECK(std::isfinite(loss.item<double>()));
  loss.backward();
  int64_t without_grad = 0;
  for (const auto& item : model.named_parameters()) {
    if (!item.value().grad().defined()) {
      CATCH_INFO("no gradient: " << item.key());
      ++without_grad;
    }
  }
  CATCH_CHECK(without_grad == 0);
  return x;
}

}  // namespace p3::models::testing

#endif  // P3_TESTS_MODELS_TEST_UTIL_H_
