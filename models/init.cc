#include "models/init.h"

#include <torch/nn/init.h>

#include <cmath>

namespace p3::models {

void TruncatedNormal(torch::Tensor w, double std, double a, double b) {
  torch::NoGradGuard no_grad;
  // PyTorch's algorithm: inverse CDF of a uniform draw between the bounds' CDF values.
  auto norm_cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double l = norm_cdf(a / std);
  const double u = norm_cdf(b / std);
  w.uniform_(2 * l - 1, 2 * u - 1);
  w.erfinv_();
  w.mul_(std * std::sqrt(2.0));
  w.clamp_(a, b);
}

void KaimingNormalFanOutRelu(torch::Tensor w) {
  torch::nn::init::kaiming_normal_(w, /*a=*/0, torch::kFanOut, torch::kReLU);
}

void XavierUniform(torch::Tensor w) { torch::nn::init::xavier_uniform_(w); }

void Normal(torch::Tensor w, double mean, double std) { torch::nn::init::normal_(w, mean, std); }

void Constant(torch::Tensor w, double value) { torch::nn::init::constant_(w, value); }

}  // namespace p3::models
