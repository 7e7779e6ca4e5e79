#include "models/small_cnn.h"

#include <torch/torch.h>

namespace p3::models {

namespace nn = torch::nn;

SmallCnn::SmallCnn(const SmallCnnOptions& options) {
  const int64_t side = options.image_size / 4;
  auto conv1 = register_module(
      "conv1", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(options.in_channels, 16, 5).padding(2)),
                              nn::ReLU(), nn::MaxPool2d(2)));
  auto conv2 =
      register_module("conv2", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(16, 32, 5).padding(2)),
                                              nn::ReLU(), nn::MaxPool2d(2)));
  auto fc1 = register_module(
      "fc1", nn::Sequential(nn::Flatten(), nn::Linear(32 * side * side, 128), nn::ReLU()));
  auto fc2 = register_module("fc2", nn::Linear(128, options.num_classes));
  AddModuleBlock("conv1", conv1);
  AddModuleBlock("conv2", conv2);
  AddModuleBlock("fc1", fc1);
  AddModuleBlock("fc2", fc2);
}

}  // namespace p3::models
