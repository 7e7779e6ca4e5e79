#include "models/inception.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/init.h"

namespace p3::models {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

using Pair = torch::ExpandingArray<2>;

class BasicConv2dImpl : public nn::Module {
 public:
  BasicConv2dImpl(int64_t in, int64_t out, Pair kernel, Pair stride = 1, Pair padding = 0) {
    conv_ = register_module(
        "conv",
        nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false)));
    bn_ = register_module("bn", nn::BatchNorm2d(nn::BatchNorm2dOptions(out).eps(0.001)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return torch::relu(bn_(conv_(x))); }

 private:
  nn::Conv2d conv_{nullptr};
  nn::BatchNorm2d bn_{nullptr};
};
TORCH_MODULE(BasicConv2d);

torch::Tensor AvgPool3x3(const torch::Tensor& x) {
  return F::avg_pool2d(x, F::AvgPool2dFuncOptions(3).stride(1).padding(1));
}

torch::Tensor MaxPool3x3s2(const torch::Tensor& x) {
  return F::max_pool2d(x, F::MaxPool2dFuncOptions(3).stride(2));
}

// Members are registered in torchvision's order; Add() keeps that order in one place.
class InceptionModule : public nn::Module {
 protected:
  BasicConv2d Add(const std::string& name, int64_t in, int64_t out, Pair kernel, Pair stride = 1,
                  Pair padding = 0) {
    return register_module(name, BasicConv2d(in, out, kernel, stride, padding));
  }
};

class InceptionAImpl : public InceptionModule {
 public:
  InceptionAImpl(int64_t in, int64_t pool_features)
      : b1x1_(Add("branch1x1", in, 64, 1)),
        b5x5_1_(Add("branch5x5_1", in, 48, 1)),
        b5x5_2_(Add("branch5x5_2", 48, 64, 5, 1, 2)),
        b3dbl_1_(Add("branch3x3dbl_1", in, 64, 1)),
        b3dbl_2_(Add("branch3x3dbl_2", 64, 96, 3, 1, 1)),
        b3dbl_3_(Add("branch3x3dbl_3", 96, 96, 3, 1, 1)),
        bpool_(Add("branch_pool", in, pool_features, 1)) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat(
        {b1x1_(x), b5x5_2_(b5x5_1_(x)), b3dbl_3_(b3dbl_2_(b3dbl_1_(x))), bpool_(AvgPool3x3(x))}, 1);
  }

 private:
  BasicConv2d b1x1_, b5x5_1_, b5x5_2_, b3dbl_1_, b3dbl_2_, b3dbl_3_, bpool_;
};

class InceptionBImpl : public InceptionModule {
 public:
  explicit InceptionBImpl(int64_t in)
      : b3x3_(Add("branch3x3", in, 384, 3, 2)),
        b3dbl_1_(Add("branch3x3dbl_1", in, 64, 1)),
        b3dbl_2_(Add("branch3x3dbl_2", 64, 96, 3, 1, 1)),
        b3dbl_3_(Add("branch3x3dbl_3", 96, 96, 3, 2)) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b3x3_(x), b3dbl_3_(b3dbl_2_(b3dbl_1_(x))), MaxPool3x3s2(x)}, 1);
  }

 private:
  BasicConv2d b3x3_, b3dbl_1_, b3dbl_2_, b3dbl_3_;
};

class InceptionCImpl : public InceptionModule {
 public:
  InceptionCImpl(int64_t in, int64_t c7)
      : b1x1_(Add("branch1x1", in, 192, 1)),
        b7_1_(Add("branch7x7_1", in, c7, 1)),
        b7_2_(Add("branch7x7_2", c7, c7, {1, 7}, 1, {0, 3})),
        b7_3_(Add("branch7x7_3", c7, 192, {7, 1}, 1, {3, 0})),
        b7dbl_1_(Add("branch7x7dbl_1", in, c7, 1)),
        b7dbl_2_(Add("branch7x7dbl_2", c7, c7, {7, 1}, 1, {3, 0})),
        b7dbl_3_(Add("branch7x7dbl_3", c7, c7, {1, 7}, 1, {0, 3})),
        b7dbl_4_(Add("branch7x7dbl_4", c7, c7, {7, 1}, 1, {3, 0})),
        b7dbl_5_(Add("branch7x7dbl_5", c7, 192, {1, 7}, 1, {0, 3})),
        bpool_(Add("branch_pool", in, 192, 1)) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b1x1_(x), b7_3_(b7_2_(b7_1_(x))),
                       b7dbl_5_(b7dbl_4_(b7dbl_3_(b7dbl_2_(b7dbl_1_(x))))), bpool_(AvgPool3x3(x))},
                      1);
  }

 private:
  BasicConv2d b1x1_, b7_1_, b7_2_, b7_3_, b7dbl_1_, b7dbl_2_, b7dbl_3_, b7dbl_4_, b7dbl_5_, bpool_;
};

class InceptionDImpl : public InceptionModule {
 public:
  explicit InceptionDImpl(int64_t in)
      : b3_1_(Add("branch3x3_1", in, 192, 1)),
        b3_2_(Add("branch3x3_2", 192, 320, 3, 2)),
        b7_1_(Add("branch7x7x3_1", in, 192, 1)),
        b7_2_(Add("branch7x7x3_2", 192, 192, {1, 7}, 1, {0, 3})),
        b7_3_(Add("branch7x7x3_3", 192, 192, {7, 1}, 1, {3, 0})),
        b7_4_(Add("branch7x7x3_4", 192, 192, 3, 2)) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b3_2_(b3_1_(x)), b7_4_(b7_3_(b7_2_(b7_1_(x)))), MaxPool3x3s2(x)}, 1);
  }

 private:
  BasicConv2d b3_1_, b3_2_, b7_1_, b7_2_, b7_3_, b7_4_;
};

class InceptionEImpl : public InceptionModule {
 public:
  explicit InceptionEImpl(int64_t in)
      : b1x1_(Add("branch1x1", in, 320, 1)),
        b3_1_(Add("branch3x3_1", in, 384, 1)),
        b3_2a_(Add("branch3x3_2a", 384, 384, {1, 3}, 1, {0, 1})),
        b3_2b_(Add("branch3x3_2b", 384, 384, {3, 1}, 1, {1, 0})),
        b3dbl_1_(Add("branch3x3dbl_1", in, 448, 1)),
        b3dbl_2_(Add("branch3x3dbl_2", 448, 384, 3, 1, 1)),
        b3dbl_3a_(Add("branch3x3dbl_3a", 384, 384, {1, 3}, 1, {0, 1})),
        b3dbl_3b_(Add("branch3x3dbl_3b", 384, 384, {3, 1}, 1, {1, 0})),
        bpool_(Add("branch_pool", in, 192, 1)) {}
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor b3 = b3_1_(x);
    torch::Tensor b3dbl = b3dbl_2_(b3dbl_1_(x));
    return torch::cat({b1x1_(x), torch::cat({b3_2a_(b3), b3_2b_(b3)}, 1),
                       torch::cat({b3dbl_3a_(b3dbl), b3dbl_3b_(b3dbl)}, 1), bpool_(AvgPool3x3(x))},
                      1);
  }

 private:
  BasicConv2d b1x1_, b3_1_, b3_2a_, b3_2b_, b3dbl_1_, b3dbl_2_, b3dbl_3a_, b3dbl_3b_, bpool_;
};

class InceptionAuxImpl : public InceptionModule {
 public:
  InceptionAuxImpl(int64_t in, int64_t num_classes)
      : conv0_(Add("conv0", in, 128, 1)),
        conv1_(Add("conv1", 128, 768, 5)),
        fc_(register_module("fc", nn::Linear(768, num_classes))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    // torchvision's pool fits 17x17 inputs (299x299 images) and larger; see the header.
    torch::Tensor pooled = x.size(2) >= 17 && x.size(3) >= 17
                               ? F::avg_pool2d(x, F::AvgPool2dFuncOptions(5).stride(3))
                               : F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions(5));
    torch::Tensor y = conv1_(conv0_(pooled));
    y = F::adaptive_avg_pool2d(y, F::AdaptiveAvgPool2dFuncOptions(1));
    return fc_(torch::flatten(y, 1));
  }
  nn::Linear& fc() { return fc_; }

 private:
  BasicConv2d conv0_, conv1_;
  nn::Linear fc_;
};

TORCH_MODULE(InceptionA);
TORCH_MODULE(InceptionB);
TORCH_MODULE(InceptionC);
TORCH_MODULE(InceptionD);
TORCH_MODULE(InceptionE);
TORCH_MODULE(InceptionAux);

}  // namespace

InceptionV3::InceptionV3(const InceptionV3Options& options)
    : aux_loss_weight_(options.aux_loss_weight) {
  auto c1a = register_module("Conv2d_1a_3x3", BasicConv2d(options.in_channels, 32, 3, 2));
  auto c2a = register_module("Conv2d_2a_3x3", BasicConv2d(32, 32, 3));
  auto c2b = register_module("Conv2d_2b_3x3", BasicConv2d(32, 64, 3, 1, 1));
  auto c3b = register_module("Conv2d_3b_1x1", BasicConv2d(64, 80, 1));
  auto c4a = register_module("Conv2d_4a_3x3", BasicConv2d(80, 192, 3));
  auto m5b = register_module("Mixed_5b", InceptionA(192, 32));
  auto m5c = register_module("Mixed_5c", InceptionA(256, 64));
  auto m5d = register_module("Mixed_5d", InceptionA(288, 64));
  auto m6a = register_module("Mixed_6a", InceptionB(288));
  auto m6b = register_module("Mixed_6b", InceptionC(768, 128));
  auto m6c = register_module("Mixed_6c", InceptionC(768, 160));
  auto m6d = register_module("Mixed_6d", InceptionC(768, 160));
  auto m6e = register_module("Mixed_6e", InceptionC(768, 192));
  auto aux = register_module("AuxLogits", InceptionAux(768, options.num_classes));
  auto m7a = register_module("Mixed_7a", InceptionD(768));
  auto m7b = register_module("Mixed_7b", InceptionE(1280));
  auto m7c = register_module("Mixed_7c", InceptionE(2048));
  auto dropout = register_module("dropout", nn::Dropout(options.dropout));
  auto fc = register_module("fc", nn::Linear(2048, options.num_classes));

  AddBlock("Conv2d_1a_3x3", {c1a}, [this, c1a](const torch::Tensor& x) {
    aux_logits_ = torch::Tensor();  // a new forward pass starts
    return c1a->forward(x);
  });
  AddModuleBlock("Conv2d_2a_3x3", c2a);
  AddBlock("Conv2d_2b_3x3", {c2b},
           [c2b](const torch::Tensor& x) { return MaxPool3x3s2(c2b->forward(x)); });
  AddModuleBlock("Conv2d_3b_1x1", c3b);
  AddBlock("Conv2d_4a_3x3", {c4a},
           [c4a](const torch::Tensor& x) { return MaxPool3x3s2(c4a->forward(x)); });
  AddModuleBlock("Mixed_5b", m5b);
  AddModuleBlock("Mixed_5c", m5c);
  AddModuleBlock("Mixed_5d", m5d);
  AddModuleBlock("Mixed_6a", m6a);
  AddModuleBlock("Mixed_6b", m6b);
  AddModuleBlock("Mixed_6c", m6c);
  AddModuleBlock("Mixed_6d", m6d);
  AddModuleBlock("Mixed_6e", m6e);
  AddBlock("AuxLogits", {aux}, [this, aux](const torch::Tensor& x) {
    if (is_training()) aux_logits_ = aux->forward(x);
    return x;
  });
  AddModuleBlock("Mixed_7a", m7a);
  AddModuleBlock("Mixed_7b", m7b);
  AddModuleBlock("Mixed_7c", m7c);
  AddBlock("fc", {fc}, [dropout, fc](const torch::Tensor& x) {
    torch::Tensor y = F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions(1));
    return fc->forward(torch::flatten(dropout->forward(y), 1));
  });

  const nn::Linear aux_fc = aux->fc();
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* conv = m->as<nn::Conv2d>()) {
      // torchvision sets stddev 0.01 on AuxLogits.conv1, a BasicConv2d, which its init loop
      // never reads (it looks at the inner Conv2d): every convolution gets 0.1.
      TruncatedNormal(conv->weight, 0.1, -2, 2);
    } else if (auto* linear = m->as<nn::Linear>()) {
      TruncatedNormal(linear->weight, linear == aux_fc.get() ? 0.001 : 0.1, -2, 2);
    } else if (auto* bn = m->as<nn::BatchNorm2d>()) {
      Constant(bn->weight, 1);
      Constant(bn->bias, 0);
    }
  }
}

torch::Tensor InceptionV3::Loss(const torch::Tensor& output, const torch::Tensor& target) {
  torch::Tensor loss = BlockModel::Loss(output, target);
  if (aux_logits_.defined()) {
    loss = loss + aux_loss_weight_ * BlockModel::Loss(aux_logits_, target);
    aux_logits_ = torch::Tensor();
  }
  return loss;
}

}  // namespace p3::models
