// Optimizers applied by a server to one slice at a time, on plain float arrays.
//
// The arithmetic follows libtorch's torch::optim::SGD and torch::optim::Adam element by
// element, so that a cluster trains the same model as the `local` mode within float
// rounding.
//
// Example:
//   OptimizerOptions options;            // SGD, lr 0.05, momentum 0.9
//   SliceOptimizer opt(options);
//   SliceOptimizerState state;           // one per slice
//   opt.Apply(params, mean_grad, n, &state);
//   const float* grads[] = {g0, g1};     // or: the mean of the workers' gradients and
//   opt.ApplyMean(params, grads, 2, n, &state);   // the update in one pass
//
// SliceOptimizer is immutable after construction and safe to share; a state must not be
// used by two threads at once.
#ifndef P3_P3_CORE_OPTIMIZER_H_
#define P3_P3_CORE_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "p3/core/lr_schedule.h"

namespace p3 {

enum class OptimizerKind { kSgd, kAdam };

struct OptimizerOptions {
  // Default: SGD.
  OptimizerKind kind = OptimizerKind::kSgd;
  // Learning rate. Default: 0.05.
  double lr = 0.05;
  // SGD momentum; 0 disables the momentum buffer. Default: 0.9.
  double momentum = 0.9;
  // SGD dampening. Default: 0.
  double dampening = 0.0;
  // L2 penalty added to the gradient (both optimizers). Default: 0.
  double weight_decay = 0.0;
  // Nesterov momentum (SGD). Default: false.
  bool nesterov = false;
  // Adam. Defaults: 0.9, 0.999, 1e-8.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // How the rate changes with the iteration (p3/core/lr_schedule.h); `lr` is its base rate.
  // Default: constant.
  LrScheduleOptions schedule;
};

// Checks every range (both optimizers' fields, whichever kind is chosen) and the
// schedule (ValidateLrSchedule); the one definition of what an optimizer accepts, used by
// the config validator, the servers and the pipeline. InvalidArgument with one line per
// bad field, each naming it, e.g.
//   optimizer.lr: -0.5 is out of range; allowed > 0 (finite)
absl::Status ValidateOptimizerOptions(const OptimizerOptions& options);

// Per-slice optimizer state (momentum buffer; Adam's moments and step count).
struct SliceOptimizerState {
  std::vector<float> buf;     // SGD momentum buffer, or Adam's first moment
  std::vector<float> buf_sq;  // Adam's second moment
  int64_t steps = 0;
};

// A term of ApplySum that is read block by block instead of from an array of n floats:
// e.g. a gradient still in a received message's buffers, decoded as the pass reaches it.
class TermSource {
 public:
  virtual ~TermSource() = default;
  // Writes the term's next `n` values (the first call: from value 0) into `out`.
  virtual void Next(int64_t n, float* out) = 0;
};

class SliceOptimizer {
 public:
  explicit SliceOptimizer(const OptimizerOptions& options) : options_(options) {}

  // params[i] -= update(grad[i]) for i in [0, n), advancing `state`.
  void Apply(float* params, const float* grad, int64_t n, SliceOptimizerState* state) const {
    ApplyMean(params, &grad, 1, n, state);
  }

  // Apply() of the mean of `num_grads` >= 1 gradients of n values each, in one pass over
  // the values: per element, grads[0][i] + grads[1][i] + ... in this order, divided by
  // num_grads when it is more than 1, then the update. Bit for bit what summing whole
  // arrays rank by rank, dividing, and Apply() compute. The gradients may be unaligned
  // but must not overlap `params` or `state`.
  // Uses the base rate options().lr; the overload below takes the rate of this update.
  void ApplyMean(float* params, const float* const* grads, int num_grads, int64_t n,
                 SliceOptimizerState* state) const {
    ApplyMean(params, grads, num_grads, n, state, options_.lr);
  }
  // The same with learning rate `lr` for this update, e.g. LearningRate(iteration).
  void ApplyMean(float* params, const float* const* grads, int num_grads, int64_t n,
                 SliceOptimizerState* state, double lr) const;

  // Apply() of (terms[0][i] + terms[1][i] + ... in this order) / `divisor` (no division
  // by 1), in one pass. For a caller that sums gradients as they arrive (ParameterShard):
  // with terms = {g0 + g1 + ... + g_{k-1} summed in rank order as float, g_k, ..., g_{w-1}}
  // and divisor w it is bit for bit ApplyMean of g0 ... g_{w-1}.
  // With `values_out`, the updated values are also written there, in the same pass (the
  // shard's float32 snapshot, written as each block is updated instead of copied after).
  // With `last`, the sum has one term more, after terms[num_terms - 1] (num_terms may then
  // be 0), read from it in order, a block at a time: bit for bit the same as that term
  // given as an array.
  void ApplySum(float* params, const float* const* terms, int num_terms, int divisor, int64_t n,
                SliceOptimizerState* state, double lr, float* values_out = nullptr,
                TermSource* last = nullptr) const;

  // The scheduled rate of the update made from iteration `iteration`'s gradients
  // (ScheduledLr(options().schedule, options().lr, iteration)). No allocation.
  double LearningRate(int64_t iteration) const {
    return ScheduledLr(options_.schedule, options_.lr, iteration);
  }

  const OptimizerOptions& options() const { return options_; }

 private:
  // The update from the mean of num_grads gradients, which is their rank-order sum
  // divided by `divisor` (num_grads for ApplyMean; 1 gradient that is a sum for ApplySum).
  // values_out: null, or where the updated values are copied block by block.
  // last: null, or ApplySum's term read block by block.
  void ApplySgd(float* params, const float* const* grads, int num_grads, TermSource* last,
                int divisor, int64_t n, SliceOptimizerState* state, double lr,
                float* values_out) const;
  void ApplyAdam(float* params, const float* const* grads, int num_grads, TermSource* last,
                 int divisor, int64_t n, SliceOptimizerState* state, double lr,
                 float* values_out) const;

  const OptimizerOptions options_;
};

}  // namespace p3

#endif  // P3_P3_CORE_OPTIMIZER_H_
