#include "p3/pipeline/stage_sgd.h"

#include <utility>

namespace p3::pipeline {

torch::Tensor PredictedWeight(const torch::Tensor& w, const torch::Tensor& v, double lr,
                              int steps) {
  return w.add(v, -static_cast<double>(steps) * lr);
}

StageSgd::StageSgd(std::vector<torch::Tensor> params, const SgdOptions& options)
    : params_(std::move(params)), options_(options) {}

void StageSgd::Step() {
  torch::NoGradGuard no_grad;
  if (velocity_.empty()) velocity_.resize(params_.size());
  for (size_t j = 0; j < params_.size(); ++j) {
    torch::Tensor& p = params_[j];
    if (!p.grad().defined()) continue;
    // The same operations, in the same order, as torch::optim::SGD::step() in 1.13.
    torch::Tensor d_p = p.grad().data();
    if (options_.weight_decay != 0) d_p = d_p.add(p.data(), options_.weight_decay);
    if (options_.momentum != 0) {
      torch::Tensor& buf = velocity_[j];
      if (!buf.defined()) {
        buf = torch::clone(d_p).detach();
      } else {
        buf.mul_(options_.momentum).add_(d_p, 1 - options_.dampening);
      }
      d_p = options_.nesterov ? d_p.add(buf, options_.momentum) : buf;
    } else {
      // d_p may be the gradient itself, which the next backward replaces: keep a copy.
      velocity_[j] = torch::clone(d_p).detach();
    }
    p.data().add_(d_p, -1 * options_.lr);
  }
  ++steps_;
}

bool StageSgd::Predict(int steps) {
  if (steps <= 0 || velocity_.empty()) return false;
  torch::NoGradGuard no_grad;
  for (size_t j = 0; j < params_.size(); ++j) {
    if (!velocity_[j].defined()) continue;
    // In place, the same kernel and arithmetic as PredictedWeight().
    params_[j].data().add_(velocity_[j], -static_cast<double>(steps) * options_.lr);
  }
  return true;
}

std::vector<torch::Tensor> StageSgd::Snapshot() const {
  std::vector<torch::Tensor> out;
  out.reserve(params_.size());
  for (const torch::Tensor& p : params_) out.push_back(p.detach().clone());
  return out;
}

void StageSgd::Load(const std::vector<torch::Tensor>& values) {
  torch::NoGradGuard no_grad;
  for (size_t j = 0; j < params_.size() && j < values.size(); ++j) {
    params_[j].data().copy_(values[j]);
  }
}

void StageSgd::ZeroGrad() {
  // In place, as torch::optim::Optimizer::zero_grad() in 1.13: reusing the buffers avoids
  // allocating (and page-faulting) every gradient again on every backward.
  for (torch::Tensor& p : params_) {
    if (p.grad().defined()) {
      p.mutable_grad().detach_();
      p.mutable_grad().zero_();
    }
  }
}

}  // namespace p3::pipeline
