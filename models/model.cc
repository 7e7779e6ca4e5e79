#include "models/model.h"

#include "absl/strings/str_cat.h"

namespace p3::models {

torch::Tensor BlockModel::Loss(const torch::Tensor& output, const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(output, target);
}

torch::Tensor BlockModel::forward(torch::Tensor x) {
  for (int64_t i = 0; i < num_blocks(); ++i) x = ForwardBlock(i, x);
  return x;
}

std::vector<std::pair<std::string, torch::Tensor>> BlockModel::OrderedParameters() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (int64_t i = 0; i < num_blocks(); ++i) {
    std::vector<torch::Tensor> params = BlockParameters(i);
    for (size_t j = 0; j < params.size(); ++j) {
      out.emplace_back(absl::StrCat(BlockName(i), "/", j), params[j]);
    }
  }
  return out;
}

}  // namespace p3::models
