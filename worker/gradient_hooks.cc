#include "worker/gradient_hooks.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {

GradientHooks::GradientHooks(std::vector<torch::Tensor> params, std::vector<std::string> names,
                             OnGradient on_gradient)
    : params_(std::move(params)),
      names_(std::move(names)),
      on_gradient_(std::move(on_gradient)),
      got_gradient_(params_.size(), false) {
  for (size_t t = 0; t < params_.size(); ++t) {
    const int tensor = static_cast<int>(t);
    hooks_.push_back(params_[t].register_hook([this, tensor](const torch::Tensor& grad) {
      if (!collecting_) return;
      if (got_gradient_[tensor]) {
        if (repeated_.empty()) repeated_ = names_[tensor];
        return;
      }
      got_gradient_[tensor] = true;
      on_gradient_(tensor, grad);
    }));
  }
}

GradientHooks::~GradientHooks() {
  for (size_t t = 0; t < hooks_.size(); ++t) params_[t].remove_hook(hooks_[t]);
}

absl::Status GradientHooks::Backward(const torch::Tensor& loss) {
  try {
    Begin();
    loss.backward();
    collecting_ = false;
  } catch (const c10::Error& e) {
    collecting_ = false;
    return absl::InternalError(absl::StrCat("backward pass failed: ", e.what_without_backtrace()));
  }
  End();
  return absl::OkStatus();
}

void GradientHooks::Begin() {
  collecting_ = true;
  got_gradient_.assign(params_.size(), false);
  repeated_.clear();
}

void GradientHooks::End() {
  collecting_ = false;
  // The hooks have the gradients; autograd's own copies are not needed.
  for (torch::Tensor& p : params_) p.mutable_grad().reset();
}

bool GradientHooks::any_gradient() const {
  return std::find(got_gradient_.begin(), got_gradient_.end(), true) != got_gradient_.end();
}

absl::Status GradientHooks::CheckEveryGradient(int rank, int64_t iteration) const {
  for (size_t t = 0; t < params_.size(); ++t) {
    if (!got_gradient_[t]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", rank, ": parameter ", names_[t], " received no gradient in ", "iteration ",
          iteration, " (the loss does not depend on it); every parameter of ",
          "the blocks is synchronised each iteration: leave it out of the blocks"));
    }
  }
  return absl::OkStatus();
}

}  // namespace p3
