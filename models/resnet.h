// ResNet-50 (torchvision.models.resnet50: "ResNet v1.5", stride in the 3x3 convolution)
// with torchvision's module names, parameter order and initialisation.
//
// Blocks, in forward order (18): "conv1" (conv1 + bn1 + ReLU + max pool), one block per
// bottleneck "layer1.0" .. "layer4.2" (3, 4, 6, 3 of them), and "fc" (global average pool +
// flatten + Linear). 25,557,032 parameters with 1000 classes. Input [B, 3, H, W] float, any
// H, W >= 32 (adaptive average pooling before fc).
//
// Example:
//   torch::manual_seed(1);
//   auto model = std::make_shared<p3::models::ResNet>(p3::models::ResNetOptions{});
//   torch::Tensor logits = model->forward(torch::randn({2, 3, 64, 64}));  // [2, 1000]
#ifndef P3_MODELS_RESNET_H_
#define P3_MODELS_RESNET_H_

#include <cstdint>
#include <vector>

#include "models/block_list_model.h"

namespace p3::models {

struct ResNetOptions {
  int64_t num_classes = 1000;                  // Default: 1000.
  int64_t in_channels = 3;                     // Default: 3.
  std::vector<int64_t> layers = {3, 4, 6, 3};  // Bottlenecks per stage. Default: ResNet-50.
};

class ResNet : public BlockListModel {
 public:
  explicit ResNet(const ResNetOptions& options);
};

}  // namespace p3::models

#endif  // P3_MODELS_RESNET_H_
