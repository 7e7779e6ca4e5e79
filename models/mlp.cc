#include "models/mlp.h"

#include <torch/torch.h>

namespace p3::models {

namespace nn = torch::nn;

Mlp::Mlp(const MlpOptions& options) {
  auto fc1 = register_module(
      "fc1", nn::Sequential(nn::Flatten(), nn::Linear(options.in_features, 40), nn::Tanh()));
  auto fc2 = register_module("fc2", nn::Sequential(nn::Linear(40, 30), nn::Tanh()));
  auto fc3 = register_module("fc3", nn::Linear(30, options.num_classes));
  AddModuleBlock("fc1", fc1);
  AddModuleBlock("fc2", fc2);
  AddModuleBlock("fc3", fc3);
}

}  // namespace p3::models
