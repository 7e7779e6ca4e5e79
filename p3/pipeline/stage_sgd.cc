#include "p3/pipeline/stage_sgd.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace p3::pipeline {

OptimizerOptions ToOptimizerOptions(const SgdOptions& options) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = options.lr;
  o.momentum = options.momentum;
  o.dampening = options.dampening;
  o.weight_decay = options.weight_decay;
  o.nesterov = options.nesterov;
  o.schedule = options.schedule;
  return o;
}

absl::Status ValidateSgdOptions(const SgdOptions& options) {
  const absl::Status status = ValidateOptimizerOptions(ToOptimizerOptions(options));
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("sgd: ", status.message()));
}

torch::Tensor PredictedWeight(const torch::Tensor& w, const torch::Tensor& v, double lr,
                              int steps) {
  return w.add(v, -static_cast<double>(steps) * lr);
}

StageSgd::StageSgd(std::vector<torch::Tensor> params, const SgdOptions& options, bool separate_real)
    : params_(std::move(params)), options_(options), separate_real_(separate_real) {
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& p : params_) {
    real_.push_back(separate_real_ ? p.detach().clone() : p);
  }
  scratch_.resize(params_.size());
}

void StageSgd::Step() {
  std::vector<torch::Tensor> grads;
  grads.reserve(params_.size());
  for (const torch::Tensor& p : params_) grads.push_back(p.grad());
  Step(grads);
}

void StageSgd::Step(const std::vector<torch::Tensor>& grads, int shard, int num_shards) {
  torch::NoGradGuard no_grad;
  if (velocity_.empty()) velocity_.resize(params_.size());
  const double lr = current_lr();
  for (size_t j = 0; j < params_.size() && j < grads.size(); ++j) {
    if (!grads[j].defined()) continue;
    if (num_shards > 1 && static_cast<int>(j % static_cast<size_t>(num_shards)) != shard) continue;
    torch::Tensor w = real_[j].data();
    // The operations of torch::optim::SGD::step() in 1.13, in the same order; the
    // out-of-place results go to kept buffers (add_out computes what add returns).
    torch::Tensor d_p = grads[j].data();
    if (options_.weight_decay != 0) {
      if (!scratch_[j].defined()) scratch_[j] = torch::empty_like(w);
      torch::add_out(scratch_[j], d_p, w, options_.weight_decay);
      d_p = scratch_[j];
    }
    if (options_.momentum != 0) {
      torch::Tensor& buf = velocity_[j];
      if (!buf.defined()) {
        buf = torch::clone(d_p).detach();
      } else {
        buf.mul_(options_.momentum).add_(d_p, 1 - options_.dampening);
      }
      if (options_.nesterov) {
        if (!scratch_[j].defined()) scratch_[j] = torch::empty_like(w);
        torch::add_out(scratch_[j], d_p, buf, options_.momentum);
        d_p = scratch_[j];
      } else {
        d_p = buf;
      }
    } else if (!velocity_[j].defined()) {
      // d_p may be the gradient itself, which the next backward overwrites: keep a copy.
      velocity_[j] = torch::clone(d_p).detach();
    } else {
      velocity_[j].copy_(d_p);
    }
    w.add_(d_p, -1 * lr);
  }
  ++steps_;
}

double StageSgd::PredictionRate(int steps) const {
  if (options_.schedule.kind == LrScheduleKind::kConstant &&
      options_.schedule.warmup_iterations == 0) {
    return static_cast<double>(steps) * options_.lr;  // PredictedWeight()'s arithmetic
  }
  double sum = 0;
  for (int k = 0; k < steps; ++k) sum += ScheduledLr(options_.schedule, options_.lr, steps_ + k);
  return sum;
}

int StageSgd::WritePredicted(int steps) {
  const bool predict = steps > 0 && !velocity_.empty();
  if (!separate_real_) return 0;  // the parameters are W; prediction needs separate_real
  torch::NoGradGuard no_grad;
  for (size_t j = 0; j < params_.size(); ++j) {
    torch::Tensor out = params_[j].data();
    if (predict && velocity_[j].defined()) {
      // One pass; the same kernel and arithmetic as PredictedWeight().
      torch::add_out(out, real_[j], velocity_[j], -PredictionRate(steps));
    } else {
      out.copy_(real_[j]);
    }
  }
  return predict ? steps : 0;
}

void StageSgd::WriteWorking(const std::vector<torch::Tensor>& values) {
  torch::NoGradGuard no_grad;
  for (size_t j = 0; j < params_.size() && j < values.size(); ++j) {
    params_[j].data().copy_(values[j]);
  }
}

void StageSgd::CopyWorking(std::vector<torch::Tensor>* out) const {
  torch::NoGradGuard no_grad;
  out->resize(params_.size());
  for (size_t j = 0; j < params_.size(); ++j) {
    torch::Tensor& o = (*out)[j];
    if (o.defined() && o.sizes() == params_[j].sizes() && o.device() == params_[j].device()) {
      o.copy_(params_[j].detach());
    } else {
      o = params_[j].detach().clone();
    }
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
