#include "worker/device_staging.h"

#include <torch/torch.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {

absl::StatusOr<std::unique_ptr<DeviceStaging>> DeviceStaging::Create(
    const DeviceStagingOptions& options, FlatBuffers* host, std::vector<torch::Tensor>& params,
    const SlicePlan& plan) {
  std::shared_ptr<CopyEngine> engine = options.engine;
  if (engine == nullptr) {
    absl::StatusOr<std::unique_ptr<CopyEngine>> streams = StreamCopyEngine(options.device);
    if (!streams.ok()) return streams.status();
    engine = std::move(*streams);
  }
  std::unique_ptr<DeviceStaging> staging(new DeviceStaging(std::move(engine)));
  try {
    torch::NoGradGuard no_grad;
    const int64_t n = plan.total_params();
    staging->host_params_ = torch::from_blob(host->params(), {n}, torch::kFloat32);
    staging->host_grads_ = torch::from_blob(host->GradientBuffer(), {n}, torch::kFloat32);
    staging->device_params_ =
        torch::empty({n}, torch::TensorOptions().dtype(torch::kFloat32).device(options.device));
    staging->device_params_.copy_(staging->host_params_);
    for (size_t t = 0; t < params.size(); ++t) {
      params[t].set_data(staging->device_params_
                             .narrow(0, plan.tensor_offset(static_cast<int>(t)), params[t].numel())
                             .view(params[t].sizes()));
    }
  } catch (const c10::Error& e) {
    return absl::FailedPreconditionError(absl::StrCat("cannot put the parameters on ",
                                                      options.device.str(), ": ",
                                                      e.what_without_backtrace()));
  }
  staging->thread_ = std::thread([s = staging.get()] { s->Loop(); });
  return staging;
}

DeviceStaging::DeviceStaging(std::shared_ptr<CopyEngine> engine) : engine_(std::move(engine)) {}

DeviceStaging::~DeviceStaging() { Shutdown(); }

void DeviceStaging::GradientToHost(int64_t offset, const torch::Tensor& grad,
                                   std::function<void()> ready) {
  std::unique_ptr<CopyFence> fence =
      engine_->ToHost(host_grads_.narrow(0, offset, grad.numel()).view(grad.sizes()), grad);
  absl::MutexLock lock(&mu_);
  pending_.push_back(Pending{std::move(fence), std::move(ready)});
  ++issued_;
}

void DeviceStaging::Drain() {
  absl::MutexLock lock(&mu_);
  const int64_t target = issued_;
  auto done = [this, target] {
    mu_.AssertHeld();
    return completed_ >= target || stopping_;
  };
  mu_.Await(absl::Condition(&done));
}

void DeviceStaging::ParamsToDevice(int64_t offset, int64_t count) {
  engine_->ToDevice(device_params_.narrow(0, offset, count), host_params_.narrow(0, offset, count));
}

void DeviceStaging::Loop() {
  for (;;) {
    Pending next;
    {
      absl::MutexLock lock(&mu_);
      auto any = [this] {
        mu_.AssertHeld();
        return !pending_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&any));
      if (pending_.empty()) return;  // stopping, and every copy handed on
      next = std::move(pending_.front());
      pending_.pop_front();
    }
    next.fence->Wait();
    next.ready();
    absl::MutexLock lock(&mu_);
    ++completed_;
  }
}

void DeviceStaging::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace p3
