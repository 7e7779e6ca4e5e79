#include "models/tensor_dataset.h"

#include <utility>

namespace p3::models {

TensorDataset::TensorDataset(torch::Tensor inputs, torch::Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {}

Batch TensorDataset::Get(const std::vector<int64_t>& indices) const {
  // from_blob does not copy; index_select copies before the vector can go away.
  torch::Tensor index = torch::from_blob(const_cast<int64_t*>(indices.data()),
                                         {static_cast<int64_t>(indices.size())}, torch::kInt64);
  return Batch{inputs_.index_select(0, index), targets_.index_select(0, index)};
}

}  // namespace p3::models
