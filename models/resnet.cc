#include "models/resnet.h"

#include <torch/torch.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "models/init.h"

namespace p3::models {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

constexpr int64_t kExpansion = 4;

nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

// torchvision's Bottleneck. `downsample` is built by the caller first, as torchvision's
// _make_layer does, so that the random draws happen in the same order.
class BottleneckImpl : public nn::Module {
 public:
  BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample) {
    conv1_ = register_module("conv1", Conv(inplanes, planes, 1, 1, 0));
    bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
    conv2_ = register_module("conv2", Conv(planes, planes, 3, stride, 1));
    bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
    conv3_ = register_module("conv3", Conv(planes, planes * kExpansion, 1, 1, 0));
    bn3_ = register_module("bn3", nn::BatchNorm2d(planes * kExpansion));
    if (downsample) downsample_ = register_module("downsample", downsample);
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = torch::relu(bn1_(conv1_(x)));
    out = torch::relu(bn2_(conv2_(out)));
    out = bn3_(conv3_(out));
    out += downsample_ ? downsample_->forward(x) : x;
    return torch::relu(out);
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  nn::Sequential downsample_{nullptr};
};

}  // namespace

ResNet::ResNet(const ResNetOptions& options) {
  auto conv1 = register_module("conv1", Conv(options.in_channels, 64, 7, 2, 3));
  auto bn1 = register_module("bn1", nn::BatchNorm2d(64));
  AddBlock("conv1", {conv1, bn1}, [conv1, bn1](const torch::Tensor& x) {
    return F::max_pool2d(torch::relu(bn1->forward(conv1->forward(x))),
                         F::MaxPool2dFuncOptions(3).stride(2).padding(1));
  });

  int64_t inplanes = 64;
  for (size_t stage = 0; stage < options.layers.size(); ++stage) {
    const int64_t planes = int64_t{64} << stage;
    const std::string stage_name = absl::StrCat("layer", stage + 1);
    auto layer = register_module(stage_name, nn::Sequential());
    for (int64_t i = 0; i < options.layers[stage]; ++i) {
      const int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      nn::Sequential downsample{nullptr};
      if (stride != 1 || inplanes != planes * kExpansion) {
        downsample = nn::Sequential(Conv(inplanes, planes * kExpansion, 1, stride, 0),
                                    nn::BatchNorm2d(planes * kExpansion));
      }
      auto block = std::make_shared<BottleneckImpl>(inplanes, planes, stride, downsample);
      layer->push_back(block);
      AddModuleBlock(absl::StrCat(stage_name, ".", i), block);
      inplanes = planes * kExpansion;
    }
  }

  auto fc = register_module("fc", nn::Linear(inplanes, options.num_classes));
  AddBlock("fc", {fc}, [fc](const torch::Tensor& x) {
    return fc->forward(
        torch::flatten(F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions(1)), 1));
  });

  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* conv = m->as<nn::Conv2d>()) {
      KaimingNormalFanOutRelu(conv->weight);
    } else if (auto* bn = m->as<nn::BatchNorm2d>()) {
      Constant(bn->weight, 1);
      Constant(bn->bias, 0);
    }
  }
}

}  // namespace p3::models
