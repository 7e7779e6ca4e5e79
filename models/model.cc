#include "models/model.h"

#include <unordered_map>

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

absl::Status CheckBlocksCoverParameters(BlockModel& model) {
  std::vector<std::string> names;
  std::unordered_map<const void*, size_t> index;  // TensorImpl -> position in names
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    index.emplace(p.value().unsafeGetTensorImpl(), names.size());
    names.push_back(p.key());
  }
  std::vector<int64_t> owner(names.size(), -1);
  for (int64_t b = 0; b < model.num_blocks(); ++b) {
    for (const torch::Tensor& p : model.BlockParameters(b)) {
      auto it = index.find(p.unsafeGetTensorImpl());
      if (it == index.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "block \"", model.BlockName(b), "\" has a parameter that is not the model's"));
      }
      if (owner[it->second] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter \"", names[it->second], "\" is in blocks \"",
            model.BlockName(owner[it->second]), "\" and \"", model.BlockName(b), "\""));
      }
      owner[it->second] = b;
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (owner[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter \"", names[i], "\" is in no block"));
    }
  }
  return absl::OkStatus();
}

}  // namespace p3::models
