// SGD with momentum and weight decay on one pipeline stage's parameters, with the two
// things the pipeline's weight policies need besides the update: the smoothed gradient v
// that SpecTrain predicts with, and cheap in-place swaps of the weight values.
//
// Step() is torch::optim::SGD's update (libtorch 1.13) operation for operation, so a
// stage trains exactly as a libtorch optimizer over the same parameters would:
//   d = grad + weight_decay * w
//   buf = d (first step), else buf = momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf
//   w = w - lr * d
// v (velocity()) is `buf` as torch keeps it; with momentum 0 torch keeps no buffer, and
// v is the last d instead (what the buffer would hold).
//
// SpecTrain's prediction s updates ahead is W - s * lr * v (weight decay enters only
// through v, as in the paper's code). Predict(), Load() and Step() write the values
// through Tensor::data(), which does not bump autograd's version counter: a graph built
// with one set of values can be back-propagated after the values were swapped, and its
// backward then reads the values present at backward time. That is what lets a stage run
// a forward with predicted (or current) weights and the backward with others.
//
// Example:
//   StageSgd sgd(params, {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
//   std::vector<torch::Tensor> real = sgd.Snapshot();
//   sgd.Predict(/*steps=*/2);          // W - 2 * lr * v
//   torch::Tensor loss = Loss(Forward(x));
//   sgd.Load(real);                    // the real weights again
//   sgd.ZeroGrad();
//   loss.backward();
//   sgd.Step();
//
// Not thread-safe: one stage thread owns it.
#ifndef P3_PIPELINE_STAGE_SGD_H_
#define P3_PIPELINE_STAGE_SGD_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace p3::pipeline {

struct SgdOptions {
  double lr = 0.05;            // Default: 0.05.
  double momentum = 0.9;       // Default: 0.9.
  double dampening = 0;        // Default: 0.
  double weight_decay = 1e-4;  // Default: 1e-4.
  bool nesterov = false;       // Default: false.
};

// w - steps * lr * v, a new tensor: SpecTrain's predicted weight.
torch::Tensor PredictedWeight(const torch::Tensor& w, const torch::Tensor& v, double lr, int steps);

class StageSgd {
 public:
  StageSgd(std::vector<torch::Tensor> params, const SgdOptions& options);

  // One update from the parameters' grad(); parameters without a gradient are skipped
  // (as torch does).
  void Step();

  // Sets every parameter that has a velocity to PredictedWeight(w, v, lr, steps), in
  // place. Returns false (and changes nothing) when steps <= 0 or before the first Step().
  bool Predict(int steps);

  // Detached copies of the current values.
  std::vector<torch::Tensor> Snapshot() const;

  // Writes values from Snapshot() back, in place.
  void Load(const std::vector<torch::Tensor>& values);

  // Sets the gradients to zero in place (torch::optim::Optimizer::zero_grad() of 1.13).
  void ZeroGrad();

  // v per parameter, empty before the first Step(); undefined for a parameter that never
  // had a gradient.
  const std::vector<torch::Tensor>& velocity() const { return velocity_; }

  // Updates applied so far.
  int64_t steps() const { return steps_; }

  const std::vector<torch::Tensor>& params() const { return params_; }
  const SgdOptions& options() const { return options_; }

 private:
  std::vector<torch::Tensor> params_;
  SgdOptions options_;
  std::vector<torch::Tensor> velocity_;
  int64_t steps_ = 0;
};

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_STAGE_SGD_H_
