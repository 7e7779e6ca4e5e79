// Parameter initialisers that libtorch's C++ API lacks or that the zoo's models share,
// written to match PyTorch's Python ones draw for draw (same generator calls in the same
// order), so a model initialised here from a seed equals its torchvision twin.
//
// Example:
//   torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 64, 7).bias(false));
//   p3::models::KaimingNormalFanOutRelu(conv->weight);
//   p3::models::TruncatedNormal(fc->weight, /*std=*/0.1, /*a=*/-2, /*b=*/2);
#ifndef P3_MODELS_INIT_H_
#define P3_MODELS_INIT_H_

#include <torch/types.h>

namespace p3::models {

// In place: normal(mean 0, std) truncated to [a, b] (torch.nn.init.trunc_normal_).
void TruncatedNormal(torch::Tensor w, double std, double a, double b);

// In place: torch.nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu").
void KaimingNormalFanOutRelu(torch::Tensor w);

// In place: torch.nn.init.xavier_uniform_(w).
void XavierUniform(torch::Tensor w);

// In place: torch.nn.init.normal_(w, mean, std).
void Normal(torch::Tensor w, double mean, double std);

// In place: torch.nn.init.constant_(w, value).
void Constant(torch::Tensor w, double value);

}  // namespace p3::models

#endif  // P3_MODELS_INIT_H_
