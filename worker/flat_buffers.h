// The worker's parameters and gradients as two flat float32 buffers in plan order: every
// parameter of the model becomes a view into the first, so that a received slice is
// written straight into the model, and a gradient that is not sent from autograd's own
// tensor is copied into the second, where the messages to the servers point
// (p3/core/to_server.h). With a server on the same machine both live in shared memory
// (p3/core/shared_memory.h) that the server maps.
//
// The gradient buffer costs one model's size of memory, and the worker's own CPU path
// never needs it (every gradient is an alias there): in private, unpinned memory it is
// allocated on first use only, by a gradient that must be copied (SetGradient) or by
// GradientBuffer() (the GPU staging path). Shared and page-locked buffers are allocated
// with the parameters.
//
// Example:
//   FlatBuffers buffers = FlatBuffers::Allocate(plan.total_params(), /*shared=*/true, rank);
//   buffers.AdoptParameters(params, plan);          // params are views into it now
//   WorkerCore core(..., plan, buffers.params(), /*grads=*/nullptr, &tracker);
//   buffers.SetGradient(t, plan.tensor_offset(t), grad, /*alias=*/true);
//   core.Gradient(slice_id, iteration, buffers.gradient(t, plan.tensor_offset(t)));
//
// Not thread-safe: the training thread writes gradients; the transports read them and
// write the parameters as the protocol allows (the slices' versions order them).
#ifndef P3_WORKER_FLAT_BUFFERS_H_
#define P3_WORKER_FLAT_BUFFERS_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "p3/core/shared_memory.h"
#include "p3/core/slice_plan.h"

namespace p3 {

class FlatBuffers {
 public:
  // Two buffers of `n` floats, the gradients zero-filled (in private, unpinned memory the
  // gradients' only once first used): in shared memory when `shared`,
  // else (or when shared memory cannot be had, with a warning on stderr naming worker
  // `rank`) in ordinary memory, page-locked when `pinned` (a GPU's copies to and from it
  // then run without the host; needs a libtorch with a GPU, and falls back to ordinary
  // memory with a warning). Shared memory is not page-locked.
  static FlatBuffers Allocate(int64_t n, bool shared, int rank, bool pinned = false);

  // Moves each tensor of `params` (plan order) into the parameter buffer at its offset in
  // `plan`, keeping its values: the tensors become views into it.
  void AdoptParameters(std::vector<torch::Tensor>& params, const SlicePlan& plan);

  // Copies `grad` into the gradient buffer from `offset` on (allocating the buffer first
  // when it has none yet).
  void SetGradient(int64_t offset, const torch::Tensor& grad);

  // Tensor `t`'s gradient, whose place in the gradient buffer starts at `offset`. With
  // `alias`, private buffers, and a contiguous float32 gradient in host memory, it is not
  // copied: this keeps a second reference to the tensor (autograd's own, which the caller
  // must not change) until t's next gradient, and aliased_gradient(t) says where it lies.
  // Otherwise it is copied into the buffer as above. The one copy it saves is a pass over
  // every gradient value on the training thread (docs/results/streaming/streaming.md,
  // "Every copy of a byte"). The reference does not stop autograd from handing its tensor
  // to the parameter's .grad without a copy: it is a separate alias of the storage.
  void SetGradient(int t, int64_t offset, const torch::Tensor& grad, bool alias);
  // Where tensor t's last gradient lies when SetGradient kept it; null when it is in the
  // gradient buffer.
  const float* aliased_gradient(int t) const;
  // Where tensor t's last gradient lies: the alias SetGradient kept, else the gradient
  // buffer from `offset` (t's place in it; null while the buffer is not allocated, which
  // means no gradient was ever copied there).
  const float* gradient(int t, int64_t offset) const;

  float* params() const { return params_.data_ptr<float>(); }
  // The gradient buffer; null until it is allocated (see the class comment).
  const float* grads() const { return grads_.defined() ? grads_.data_ptr<float>() : nullptr; }
  // The gradient buffer, allocated (zero-filled) now if it was not: for a writer of its
  // own, such as the GPU staging path's copies from the device.
  float* GradientBuffer();
  // The shared memory behind the buffers; null when they are private.
  SharedRegion* shared() const { return shared_.get(); }

 private:
  // The tensors keep the mapping alive as long as any view of them lives.
  std::shared_ptr<SharedRegion> shared_;
  torch::Tensor params_;
  torch::Tensor grads_;  // undefined until first used (see the class comment)
  // Per tensor: its last gradient when kept rather than copied; undefined otherwise.
  std::vector<torch::Tensor> aliased_;
};

// A model's float32 buffers (BatchNorm's running statistics; others are left out) and
// their values packed in order, for Worker::AverageBuffers.
struct FloatBuffers {
  std::vector<torch::Tensor> tensors;
  std::shared_ptr<std::vector<float>> values;
};
FloatBuffers PackFloatBuffers(const std::vector<torch::Tensor>& buffers);
// Copies `values` (as many as the tensors hold, in order) into the tensors.
void UnpackFloatBuffers(const std::vector<float>& values, std::vector<torch::Tensor>& tensors);

}  // namespace p3

#endif  // P3_WORKER_FLAT_BUFFERS_H_
