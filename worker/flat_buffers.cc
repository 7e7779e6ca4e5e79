#include "worker/flat_buffers.h"

#include <torch/torch.h>

#include <iostream>
#include <utility>

namespace p3 {

FlatBuffers FlatBuffers::Allocate(int64_t n, bool shared, int rank, bool pinned) {
  FlatBuffers buffers;
  if (shared) {
    absl::StatusOr<std::unique_ptr<SharedRegion>> region = SharedRegion::Create(n);
    if (region.ok()) {
      buffers.shared_ = std::shared_ptr<SharedRegion>(std::move(*region));
      auto keep = [region = buffers.shared_](void*) {};
      const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
      buffers.params_ = torch::from_blob(buffers.shared_->params(), {n}, keep, f32);
      buffers.grads_ = torch::from_blob(buffers.shared_->grads(), {n}, keep, f32);  // zero-filled
      return buffers;
    }
    std::cerr << "worker " << rank << ": " << region.status().message()
              << "; values go over the streams" << std::endl;
  }
  if (pinned) {
    try {
      const auto page_locked = torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(true);
      buffers.params_ = torch::empty({n}, page_locked);
      buffers.grads_ = torch::zeros({n}, page_locked);  // pinned: allocate once, now
      return buffers;
    } catch (const c10::Error& e) {
      std::cerr << "worker " << rank << ": no page-locked memory (" << e.what_without_backtrace()
                << "); copies to and from the device wait for the host" << std::endl;
    }
  }
  buffers.params_ = torch::empty({n}, torch::kFloat32);
  return buffers;  // the gradient buffer on first use
}

void FlatBuffers::AdoptParameters(std::vector<torch::Tensor>& params, const SlicePlan& plan) {
  torch::NoGradGuard no_grad;
  for (size_t t = 0; t < params.size(); ++t) {
    torch::Tensor view =
        params_.narrow(0, plan.tensor_offset(static_cast<int>(t)), params[t].numel())
            .view(params[t].sizes());
    view.copy_(params[t]);
    params[t].set_data(view);
  }
}

float* FlatBuffers::GradientBuffer() {
  if (!grads_.defined()) grads_ = torch::zeros({params_.numel()}, torch::kFloat32);
  return grads_.data_ptr<float>();
}

void FlatBuffers::SetGradient(int64_t offset, const torch::Tensor& grad) {
  torch::NoGradGuard no_grad;
  GradientBuffer();
  grads_.narrow(0, offset, grad.numel()).view(grad.sizes()).copy_(grad);
}

void FlatBuffers::SetGradient(int t, int64_t offset, const torch::Tensor& grad, bool alias) {
  if (aliased_.size() <= static_cast<size_t>(t)) aliased_.resize(static_cast<size_t>(t) + 1);
  // Strided layout first: is_contiguous() throws on a sparse tensor.
  if (alias && shared_ == nullptr && grad.layout() == torch::kStrided && grad.device().is_cpu() &&
      grad.scalar_type() == torch::kFloat32 && grad.is_contiguous() &&
      offset + grad.numel() <= params_.numel()) {
    // detach(): a new TensorImpl over the same storage, so that autograd's use count of
    // its own tensor stays as it was and AccumulateGrad still takes it without a copy.
    aliased_[t] = grad.detach();
    return;
  }
  aliased_[t] = torch::Tensor();
  SetGradient(offset, grad);
}

const float* FlatBuffers::aliased_gradient(int t) const {
  if (static_cast<size_t>(t) >= aliased_.size() || !aliased_[t].defined()) return nullptr;
  return aliased_[t].data_ptr<float>();
}

const float* FlatBuffers::gradient(int t, int64_t offset) const {
  if (const float* kept = aliased_gradient(t); kept != nullptr) return kept;
  const float* buffer = grads();
  return buffer == nullptr ? nullptr : buffer + offset;
}

FloatBuffers PackFloatBuffers(const std::vector<torch::Tensor>& buffers) {
  FloatBuffers packed{.values = std::make_shared<std::vector<float>>()};
  int64_t n = 0;
  for (const torch::Tensor& b : buffers) {
    if (b.scalar_type() != torch::kFloat32) continue;
    packed.tensors.push_back(b);
    n += b.numel();
  }
  packed.values->reserve(static_cast<size_t>(n));
  for (const torch::Tensor& b : packed.tensors) {
    const torch::Tensor c = b.detach().to(torch::kCPU).contiguous();
    packed.values->insert(packed.values->end(), c.data_ptr<float>(),
                          c.data_ptr<float>() + c.numel());
  }
  return packed;
}

void UnpackFloatBuffers(const std::vector<float>& values, std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (torch::Tensor& b : tensors) {
    b.copy_(torch::from_blob(const_cast<float*>(values.data()) + at, b.sizes(), torch::kFloat32));
    at += b.numel();
  }
}

}  // namespace p3
