// SGD with momentum and weight decay on one pipeline stage's parameters, with what the
// pipeline's weight policies need besides the update: the smoothed gradient v that
// SpecTrain predicts with, and cheap ways to put other weight values into the model.
//
// Step() is torch::optim::SGD's update (libtorch 1.13) operation for operation, so a
// stage trains exactly as a libtorch optimizer over the same parameters would:
//   d = grad + weight_decay * w
//   buf = d (first step), else buf = momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf
//   w = w - lr * d
// (into buffers kept from step to step: the same arithmetic, no allocation per step).
// The rate of the update number t (0 for the first) is ScheduledLr(schedule, lr, t)
// (p3/core/lr_schedule.h), as the servers and mode `local` take it; SpecTrain's prediction s
// updates ahead uses the rates of those s updates, lr(t) + ... + lr(t+s-1) in place of
// s * lr (exactly s * lr under the constant schedule).
// v (velocity()) is `buf` as torch keeps it; with momentum 0 torch keeps no buffer, and v
// is the last d instead (what the buffer would hold).
//
// Real and working weights. Without `separate_real`, the model's parameters are the real
// weights W and Step() updates them. With it, the optimizer keeps W in tensors of its own
// (copies made at construction) and the parameters are *working* values that the stage
// writes before a forward or backward: WriteReal() (W), WritePredicted(s) (SpecTrain's
// W - s * lr * v, one pass; weight decay enters only through v, as in the paper's code)
// or WriteWorking(stash). Step() then takes the gradients from the parameters and updates
// W only. Every write goes through Tensor::data(), which does not bump autograd's version
// counter: a graph built with one set of values can be back-propagated after the values
// changed, and its backward reads the values present at backward time (a layer needs its
// weights only for its input's gradient). That is how a stage runs a forward with one
// set of weights and its backward with another.
//
// Example (SpecTrain, forward 2 versions ahead, backward with the real weights):
//   StageSgd sgd(params, {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4},
//                /*separate_real=*/true);
//   sgd.WritePredicted(2);              // parameters := W - 2 * lr * v
//   torch::Tensor loss = Loss(Forward(x));
//   sgd.WriteReal();                    // parameters := W
//   sgd.ZeroGrad();
//   loss.backward();
//   sgd.Step();                         // W := W - lr * d
//
// Not thread-safe: one stage thread owns it.
#ifndef P3_PIPELINE_STAGE_SGD_H_
#define P3_PIPELINE_STAGE_SGD_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "p3/core/lr_schedule.h"
#include "p3/core/optimizer.h"

namespace p3::pipeline {

struct SgdOptions {
  double lr = 0.05;            // Default: 0.05.
  double momentum = 0.9;       // Default: 0.9.
  double dampening = 0;        // Default: 0.
  double weight_decay = 1e-4;  // Default: 1e-4.
  bool nesterov = false;       // Default: false.
  // The rate per update (stage updates count iterations). Default: constant.
  LrScheduleOptions schedule;
};

// The same settings as the core's optimizer options (kind SGD), so that one validation
// (p3::ValidateOptimizerOptions) covers the cluster's optimizer and the stages'.
OptimizerOptions ToOptimizerOptions(const SgdOptions& options);
// p3::ValidateOptimizerOptions() on ToOptimizerOptions(options): InvalidArgumentError
// "sgd: optimizer.<field>: ..." for a learning rate <= 0, a momentum outside [0, 1), a
// negative weight decay, or nesterov without momentum or with dampening.
absl::Status ValidateSgdOptions(const SgdOptions& options);

// w - steps * lr * v, a new tensor: SpecTrain's predicted weight.
torch::Tensor PredictedWeight(const torch::Tensor& w, const torch::Tensor& v, double lr, int steps);

class StageSgd {
 public:
  StageSgd(std::vector<torch::Tensor> params, const SgdOptions& options,
           bool separate_real = false);

  // One update of the real weights from the parameters' grad(); parameters without a
  // gradient are skipped (as torch does).
  void Step();
  // The same with explicit gradients, one per parameter (undefined: skipped). With
  // num_shards > 1, only parameters j with j % num_shards == shard are updated (their
  // velocity kept here); the update count advances all the same. Threads that share the
  // parameters' storage (data_parallel on one device) thus split one update between them.
  void Step(const std::vector<torch::Tensor>& grads, int shard = 0, int num_shards = 1);

  // Parameters := W - steps * lr * v, for every parameter that has a velocity (the others
  // get W). Returns the steps applied: `steps`, or 0 (parameters := W) when steps <= 0 or
  // before the first Step(). Without separate_real, only steps <= 0 is allowed (a no-op).
  int WritePredicted(int steps);
  // Parameters := W. A no-op without separate_real.
  void WriteReal() { WritePredicted(0); }
  // Parameters := `values` (e.g. from CopyWorking()). Requires separate_real.
  void WriteWorking(const std::vector<torch::Tensor>& values);
  // `*out` := the parameters' current values, reusing out's tensors when they fit.
  void CopyWorking(std::vector<torch::Tensor>* out) const;

  // Sets the gradients to zero in place (torch::optim::Optimizer::zero_grad() of 1.13).
  void ZeroGrad();

  // The real weights W (the parameters themselves without separate_real).
  const std::vector<torch::Tensor>& real() const { return real_; }
  // v per parameter, empty before the first Step(); undefined for a parameter that never
  // had a gradient.
  const std::vector<torch::Tensor>& velocity() const { return velocity_; }
  // Updates applied so far.
  int64_t steps() const { return steps_; }
  // The rate of the next update, ScheduledLr(options().schedule, options().lr, steps()).
  double current_lr() const { return ScheduledLr(options_.schedule, options_.lr, steps_); }
  // The model's parameters (the working values with separate_real).
  const std::vector<torch::Tensor>& params() const { return params_; }
  const SgdOptions& options() const { return options_; }
  bool separate_real() const { return separate_real_; }

 private:
  std::vector<torch::Tensor> params_;
  SgdOptions options_;
  bool separate_real_;
  std::vector<torch::Tensor> real_;
  std::vector<torch::Tensor> velocity_;
  std::vector<torch::Tensor> scratch_;  // d = grad + weight_decay * w, per parameter
  int64_t steps_ = 0;

  // The sum of the rates of the next `steps` updates (steps * lr when constant).
  double PredictionRate(int steps) const;
};

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_STAGE_SGD_H_
