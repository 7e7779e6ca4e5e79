// Autograd hooks that catch each parameter's gradient the moment backward produces it, so
// that its slices can go to the servers while backward goes on with the earlier layers,
// and the check that every parameter got one: synchronous training needs every
// parameter's gradient from every worker, and one the loss does not reach would leave the
// servers waiting for it until peer_timeout.
//
// Example:
//   GradientHooks hooks(params, names, [&](int t, const torch::Tensor& grad) {
//     buffers.SetGradient(plan.tensor_offset(t), grad);
//   });
//   P3_RETURN_IF_ERROR(hooks.Backward(loss));
//   P3_RETURN_IF_ERROR(hooks.CheckEveryGradient(rank, iteration));
//
// Not thread-safe: the training thread runs Backward, and autograd calls the hooks on it.
#ifndef P3_WORKER_GRADIENT_HOOKS_H_
#define P3_WORKER_GRADIENT_HOOKS_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace p3 {

class GradientHooks {
 public:
  // Called with tensor `t`'s index in `params` and its gradient, during Backward() only.
  using OnGradient = std::function<void(int t, const torch::Tensor& grad)>;

  // Hooks every tensor of `params`; `names` name them in errors.
  GradientHooks(std::vector<torch::Tensor> params, std::vector<std::string> names,
                OnGradient on_gradient);
  // Removes the hooks.
  ~GradientHooks();

  GradientHooks(const GradientHooks&) = delete;
  GradientHooks& operator=(const GradientHooks&) = delete;

  // loss.backward() with the hooks collecting; autograd's own copies of the gradients
  // are released afterwards (the model's .grad fields are not used). A libtorch error is
  // returned as Internal.
  absl::Status Backward(const torch::Tensor& loss);

  // Backward() in two halves, for a caller that runs loss.backward() itself (the Python
  // front end: the user's own backward): Begin() starts collecting, End() stops and
  // releases autograd's copies of the gradients (the model's .grad fields).
  void Begin();
  void End();
  // Since Begin(): whether any tensor received a gradient, and the name of the first one
  // that received a second (a second backward pass before End()); "" when none did. A
  // second gradient is not passed on.
  bool any_gradient() const;
  const std::string& repeated() const { return repeated_; }

  // After Backward: FailedPrecondition naming the first parameter that received no
  // gradient in `iteration` (on worker `rank`), else OK.
  absl::Status CheckEveryGradient(int rank, int64_t iteration) const;

 private:
  std::vector<torch::Tensor> params_;
  std::vector<std::string> names_;
  OnGradient on_gradient_;
  std::vector<unsigned> hooks_;
  bool collecting_ = false;
  std::vector<bool> got_gradient_;  // per tensor, in the last Backward()
  std::string repeated_;
};

}  // namespace p3

#endif  // P3_WORKER_GRADIENT_HOOKS_H_
