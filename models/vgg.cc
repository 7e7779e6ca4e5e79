#include "models/vgg.h"

#include <torch/torch.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "models/init.h"

namespace p3::models {
namespace {

namespace nn = torch::nn;

constexpr int64_t kPool = 0;  // a max pool in a configuration list

// torchvision's cfgs "D" (VGG-16) and "E" (VGG-19).
std::vector<int64_t> Config(int64_t depth) {
  if (depth == 19) {
    return {64,  64,  kPool, 128, 128,   kPool, 256, 256, 256, 256,  kPool,
            512, 512, 512,   512, kPool, 512,   512, 512, 512, kPool};
  }
  return {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
          kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
}

}  // namespace

Vgg::Vgg(const VggOptions& options) {
  auto features = register_module("features", nn::Sequential());
  std::vector<size_t> conv_indices;
  int64_t in = options.in_channels;
  for (int64_t v : Config(options.depth)) {
    if (v == kPool) {
      features->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
    } else {
      conv_indices.push_back(features->size());
      features->push_back(nn::Conv2d(nn::Conv2dOptions(in, v, 3).padding(1)));
      features->push_back(nn::ReLU(nn::ReLUOptions(/*inplace=*/true)));
      in = v;
    }
  }
  auto avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(7));
  auto classifier = register_module(
      "classifier", nn::Sequential(nn::Linear(512 * 7 * 7, 4096), nn::ReLU(nn::ReLUOptions(true)),
                                   nn::Dropout(options.dropout), nn::Linear(4096, 4096),
                                   nn::ReLU(nn::ReLUOptions(true)), nn::Dropout(options.dropout),
                                   nn::Linear(4096, options.num_classes)));

  for (size_t i = 0; i < conv_indices.size(); ++i) {
    const size_t end = i + 1 < conv_indices.size() ? conv_indices[i + 1] : features->size();
    AddSequentialRange(absl::StrCat("features.", conv_indices[i]), features, conv_indices[i], end);
  }
  AddBlock("classifier.0", {classifier->ptr(0)}, [avgpool, classifier](const torch::Tensor& x) {
    torch::Tensor y = torch::flatten(avgpool->forward(x), 1);
    for (size_t j = 0; j < 3; ++j) y = (classifier->begin() + j)->forward(y);
    return y;
  });
  AddSequentialRange("classifier.3", classifier, 3, 6);
  AddSequentialRange("classifier.6", classifier, 6, 7);

  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* conv = m->as<nn::Conv2d>()) {
      KaimingNormalFanOutRelu(conv->weight);
      Constant(conv->bias, 0);
    } else if (auto* linear = m->as<nn::Linear>()) {
      Normal(linear->weight, 0, 0.01);
      Constant(linear->bias, 0);
    }
  }
}

}  // namespace p3::models
