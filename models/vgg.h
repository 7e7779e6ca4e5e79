// VGG-16 and VGG-19 without batch normalisation (torchvision.models.vgg16 / vgg19) with
// torchvision's module names, parameter order and initialisation.
//
// Blocks, in forward order: one per convolution, named after its index in `features`
// ("features.0", "features.2", ...; each runs its Conv2d + ReLU and the max pool that
// follows, if any), then "classifier.0" (adaptive average pool to 7x7 + flatten +
// Linear(25088, 4096) + ReLU + Dropout), "classifier.3" (Linear(4096, 4096) + ReLU +
// Dropout) and "classifier.6" (Linear(4096, num_classes)). With 1000 classes: VGG-16
// 138,357,544 parameters (16 blocks), VGG-19 143,667,240 (19 blocks). Input
// [B, 3, H, W] float, any H, W >= 32: the adaptive pool keeps every parameter in use
// (at 32x32 it repeats the 1x1 feature map to 7x7).
//
// Example:
//   torch::manual_seed(1);
//   p3::models::VggOptions options;
//   options.depth = 19;
//   auto model = std::make_shared<p3::models::Vgg>(options);
//   torch::Tensor logits = model->forward(torch::randn({2, 3, 32, 32}));  // [2, 1000]
#ifndef P3_MODELS_VGG_H_
#define P3_MODELS_VGG_H_

#include <cstdint>

#include "models/block_list_model.h"

namespace p3::models {

struct VggOptions {
  int64_t depth = 16;          // 16 or 19 (callers check). Default: 16.
  int64_t num_classes = 1000;  // Default: 1000.
  int64_t in_channels = 3;     // Default: 3.
  double dropout = 0.5;        // Default: 0.5, torchvision's.
};

class Vgg : public BlockListModel {
 public:
  explicit Vgg(const VggOptions& options);
};

}  // namespace p3::models

#endif  // P3_MODELS_VGG_H_
