#include "p3/optimizer.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3 {

namespace {

// "<field>: <value> is out of range; allowed <allowed>" when `ok` is false.
void Check(bool ok, const char* field, double value, const char* allowed,
           std::vector<std::string>* errors) {
  if (!ok)
    errors->push_back(absl::StrCat(field, ": ", value, " is out of range; allowed ", allowed));
}

}  // namespace

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  std::vector<std::string> errors;
  Check(o.lr > 0 && std::isfinite(o.lr), "optimizer.lr", o.lr, "> 0 (finite)", &errors);
  Check(o.momentum >= 0 && o.momentum < 1, "optimizer.momentum", o.momentum, "[0, 1)", &errors);
  Check(o.dampening >= 0 && o.dampening <= 1, "optimizer.dampening", o.dampening, "[0, 1]",
        &errors);
  Check(o.weight_decay >= 0 && std::isfinite(o.weight_decay), "optimizer.weight_decay",
        o.weight_decay, ">= 0 (finite)", &errors);
  if (o.nesterov && (o.kind != OptimizerKind::kSgd || !(o.momentum > 0) || o.dampening != 0)) {
    errors.push_back(
        "optimizer.nesterov: true requires SGD with optimizer.momentum > 0 and no dampening");
  }
  Check(o.beta1 >= 0 && o.beta1 < 1, "optimizer.beta1", o.beta1, "[0, 1)", &errors);
  Check(o.beta2 >= 0 && o.beta2 < 1, "optimizer.beta2", o.beta2, "[0, 1)", &errors);
  Check(o.eps > 0 && std::isfinite(o.eps), "optimizer.eps", o.eps, "> 0 (finite)", &errors);
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
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
