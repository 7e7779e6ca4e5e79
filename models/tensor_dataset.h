// A Dataset over two in-memory tensors whose first dimension is the sample.
//
// Get() is safe to call from several threads at once: the tensors are never modified.
//
// Example:
//   auto data = std::make_shared<p3::models::TensorDataset>(torch::randn({100, 12}),
//                                                          torch::randint(10, {100}));
//   p3::models::Batch b = data->Get({3, 1, 4});  // input [3, 12], target [3]
#ifndef P3_MODELS_TENSOR_DATASET_H_
#define P3_MODELS_TENSOR_DATASET_H_

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "models/dataset.h"

namespace p3::models {

class TensorDataset : public Dataset {
 public:
  // `inputs` and `targets` must have the same size(0); callers check that first.
  TensorDataset(torch::Tensor inputs, torch::Tensor targets);

  int64_t size() const override { return inputs_.size(0); }

  // Indices must be in [0, size()); libtorch throws c10::Error otherwise.
  Batch Get(const std::vector<int64_t>& indices) const override;

  const torch::Tensor& inputs() const { return inputs_; }
  const torch::Tensor& targets() const { return targets_; }

 private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
};

}  // namespace p3::models

#endif  // P3_MODELS_TENSOR_DATASET_H_
