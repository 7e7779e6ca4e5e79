// The default experiment's model: a small CNN for Fashion-MNIST (28x28x1, 10 classes).
//
// Blocks, in forward order:
//   "conv1": Conv2d(in_channels, 16, 5, padding 2) + ReLU + MaxPool2d(2)
//   "conv2": Conv2d(16, 32, 5, padding 2) + ReLU + MaxPool2d(2)
//   "fc1":   Flatten + Linear(32 * (image_size/4)^2, 128) + ReLU   (weight: 200,704 at 28x28)
//   "fc2":   Linear(128, num_classes)
// 215,370 parameters at the defaults. Input [B, in_channels, image_size, image_size] float.
//
// Example:
//   torch::manual_seed(1);
//   auto model = std::make_shared<p3::models::SmallCnn>(p3::models::SmallCnnOptions{});
//   torch::Tensor logits = model->forward(torch::randn({8, 1, 28, 28}));  // [8, 10]
#ifndef P3_MODELS_SMALL_CNN_H_
#define P3_MODELS_SMALL_CNN_H_

#include <cstdint>

#include "models/block_list_model.h"

namespace p3::models {

struct SmallCnnOptions {
  int64_t num_classes = 10;  // Default: 10.
  int64_t in_channels = 1;   // Default: 1.
  int64_t image_size = 28;   // Default: 28. Must be a multiple of 4.
};

class SmallCnn : public BlockListModel {
 public:
  explicit SmallCnn(const SmallCnnOptions& options);
};

}  // namespace p3::models

#endif  // P3_MODELS_SMALL_CNN_H_
