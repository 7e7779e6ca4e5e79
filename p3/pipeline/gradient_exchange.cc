#include "p3/pipeline/gradient_exchange.h"

#include <torch/torch.h>

#include <utility>

namespace p3::pipeline {

GradientExchange::GradientExchange(int num_replicas)
    : n_(num_replicas < 1 ? 1 : num_replicas), grads_(n_), weights_(n_), losses_(n_) {}

std::optional<GradientExchange::Result> GradientExchange::Reduce(int replica,
                                                                 std::vector<torch::Tensor> grads,
                                                                 double weight, double loss,
                                                                 const torch::Device& device) {
  int64_t round = 0;
  size_t count = 0;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return std::nullopt;
    round = round_;
    count = grads.size();
    if (sums_.size() != count) sums_.resize(count);
    grads_[replica] = std::move(grads);
    weights_[replica] = weight;
    losses_[replica] = loss;
    if (++arrived_ == n_) all_arrived_ = round + 1;
    auto arrived = [this, round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return closed_ || all_arrived_ > round;
    };
    mu_.Await(absl::Condition(&arrived));
    if (closed_) return std::nullopt;
  }
  SumShare(replica, count, device);
  absl::MutexLock lock(&mu_);
  if (++reduced_ == n_) {
    loss_ = 0;
    for (int r = 0; r < n_; ++r) {
      loss_ += weights_[r] * losses_[r];
      grads_[r].clear();
    }
    arrived_ = 0;
    reduced_ = 0;
    ++round_;
  } else {
    auto done = [this, round]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || round_ > round; };
    mu_.Await(absl::Condition(&done));
    if (round_ == round) return std::nullopt;  // closed before the round completed
  }
  return Result{&sums_, loss_};
}

void GradientExchange::SumShare(int replica, size_t count, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  for (size_t j = replica; j < count; j += n_) {
    torch::Tensor& sum = sums_[j];
    bool first = true;
    for (int r = 0; r < n_; ++r) {
      const torch::Tensor& g = grads_[r][j];
      if (!g.defined()) continue;
      if (first) {
        if (!sum.defined() || sum.sizes() != g.sizes()) sum = torch::empty_like(g, device);
        torch::mul_out(sum, g.to(device), weights_[r]);
        first = false;
      } else {
        sum.add_(g.to(device), weights_[r]);
      }
    }
    if (first) sum = torch::Tensor();  // no replica has a gradient for it
  }
}

void GradientExchange::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

}  // namespace p3::pipeline
