// A tiny multi-layer perceptron for fast tests (well under 1 ms per training step).
//
// Blocks, in forward order:
//   "fc1": Flatten + Linear(in_features, 40) + Tanh   (weight 480 at 12 inputs)
//   "fc2": Linear(40, 30) + Tanh                        (weight 1,200)
//   "fc3": Linear(30, num_classes)
// With small slice sizes (e.g. 100 parameters) some tensors are larger and some smaller
// than a slice. Input [B, in_features] float, or any [B, ...] with in_features elements
// per sample (it is flattened).
//
// Example:
//   auto model = std::make_shared<p3::models::Mlp>(p3::models::MlpOptions{});
//   torch::Tensor logits = model->forward(torch::randn({4, 12}));  // [4, 10]
#ifndef P3_MODELS_MLP_H_
#define P3_MODELS_MLP_H_

#include <cstdint>

#include "models/block_list_model.h"

namespace p3::models {

struct MlpOptions {
  int64_t in_features = 12;  // Default: 12.
  int64_t num_classes = 10;  // Default: 10.
};

class Mlp : public BlockListModel {
 public:
  explicit Mlp(const MlpOptions& options);
};

}  // namespace p3::models

#endif  // P3_MODELS_MLP_H_
