#include "p3/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace p3 {

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  if (!(o.lr > 0)) return absl::InvalidArgumentError(absl::StrCat("optimizer.lr: ", o.lr, " must be > 0"));
  if (!(o.momentum >= 0 && o.momentum < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.momentum: ", o.momentum, " is out of range; allowed [0, 1)"));
  }
  if (!(o.weight_decay >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.weight_decay: ", o.weight_decay, " must be >= 0"));
  }
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    return absl::InvalidArgumentError(
        "optimizer.nesterov: needs momentum > 0 and zero dampening");
  }
  if (o.kind == OptimizerKind::kAdam) {
    if (!(o.beta1 >= 0 && o.beta1 < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer.beta1: ", o.beta1, " is out of range; allowed [0, 1)"));
    }
    if (!(o.beta2 >= 0 && o.beta2 < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer.beta2: ", o.beta2, " is out of range; allowed [0, 1)"));
    }
    if (!(o.eps > 0)) return absl::InvalidArgumentError(absl::StrCat("optimizer.eps: ", o.eps, " must be > 0"));
  }
  return absl::OkStatus();
}

void SliceOptimizer::Apply(float* params, const float* grad, int64_t n,
                           SliceOptimizerState* state) const {
  if (options_.kind == OptimizerKind::kSgd) {
    ApplySgd(params, grad, n, state);
  } else {
    ApplyAdam(params, grad, n, state);
  }
}

// torch::optim::SGD, per element, in float as libtorch computes it.
void SliceOptimizer::ApplySgd(float* params, const float* grad, int64_t n,
                              SliceOptimizerState* state) const {
  const float lr = static_cast<float>(options_.lr);
  const float wd = static_cast<float>(options_.weight_decay);
  const float momentum = static_cast<float>(options_.momentum);
  const float keep = static_cast<float>(1.0 - options_.dampening);
  const bool first = state->steps == 0;
  ++state->steps;
  if (momentum == 0) {
    for (int64_t i = 0; i < n; ++i) {
      float d = grad[i];
      if (wd != 0) d += wd * params[i];
      params[i] += -lr * d;
    }
    return;
  }
  if (first) state->buf.assign(n, 0.0f);
  float* buf = state->buf.data();
  for (int64_t i = 0; i < n; ++i) {
    float d = grad[i];
    if (wd != 0) d += wd * params[i];
    buf[i] = first ? d : buf[i] * momentum + keep * d;
    const float step = options_.nesterov ? d + momentum * buf[i] : buf[i];
    params[i] += -lr * step;
  }
}

// torch::optim::Adam (no amsgrad), per element.
void SliceOptimizer::ApplyAdam(float* params, const float* grad, int64_t n,
                               SliceOptimizerState* state) const {
  if (state->steps == 0) {
    state->buf.assign(n, 0.0f);
    state->buf_sq.assign(n, 0.0f);
  }
  ++state->steps;
  const double b1 = options_.beta1;
  const double b2 = options_.beta2;
  const double bias1 = 1 - std::pow(b1, static_cast<double>(state->steps));
  const double bias2 = 1 - std::pow(b2, static_cast<double>(state->steps));
  const float step_size = static_cast<float>(options_.lr / bias1);
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  const float wd = static_cast<float>(options_.weight_decay);
  const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
  const float eps = static_cast<float>(options_.eps);
  float* m = state->buf.data();
  float* v = state->buf_sq.data();
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (wd != 0) g += wd * params[i];
    m[i] = m[i] * fb1 + (1 - fb1) * g;
    v[i] = v[i] * fb2 + (1 - fb2) * g * g;
    const float denom = std::sqrt(v[i]) / bias2_sqrt + eps;
    params[i] += -step_size * (m[i] / denom);
  }
}

}  // namespace p3
