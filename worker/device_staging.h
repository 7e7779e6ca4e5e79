// Between a model on a device (a GPU) and the host buffers the transports use
// (worker/flat_buffers.h): the model's parameters become views into one flat buffer on the
// device; each gradient is copied into the host gradient buffer as autograd produces it, by a
// CopyEngine (worker/copy_engine.h) that does not wait, and its slices are handed on only once
// their own copy is done; before each block's forward pass, the block's values of the current
// version are copied up, and only the device waits for them.
//
// Why a host buffer may be read or written while copies are in flight (the same argument as
// for the CPU, docs/design.md): version t+1 of a block's values is written into the host
// buffer only after every worker's gradient of iteration t of that block reached the servers,
// so after this worker's copy of it completed — and that copy was ordered on the device after
// all the work issued before the gradient's hook, which includes every read of the block's
// version t. Likewise the gradient buffer of iteration t+1 is written only after version t+1
// arrived, so after the servers have read iteration t's.
//
// Example:
//   P3_ASSIGN_OR_RETURN(auto staging, DeviceStaging::Create({.device = torch::Device("cuda:0")},
//                                                           &buffers, params, plan));
//   staging->GradientToHost(plan.tensor_offset(t), grad, [=] { SendSlicesOf(t); });  // hook
//   staging->ParamsToDevice(first, count);                  // before block b's forward pass
//
// Thread-safe for one training thread: GradientToHost, Drain and ParamsToDevice are called
// from it; the `ready` callbacks run on the staging thread, in the order of the calls.
#ifndef P3_WORKER_DEVICE_STAGING_H_
#define P3_WORKER_DEVICE_STAGING_H_

#include <torch/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "p3/core/slice_plan.h"
#include "worker/copy_engine.h"
#include "worker/flat_buffers.h"

namespace p3 {

struct DeviceStagingOptions {
  // Where the model runs. Default: the CPU.
  torch::Device device = torch::kCPU;
  // How values cross; null: StreamCopyEngine(device). A test gives one that copies on the
  // CPU on a thread of its own, to run this whole path without a GPU. Default: null.
  std::shared_ptr<CopyEngine> engine;
};

class DeviceStaging {
 public:
  // Moves `params` (plan order; their values are in host->params() already) to
  // options.device as views into one flat device buffer; the gradients come back into
  // host's gradient buffer (allocated now if it was not). FailedPrecondition when the
  // device is not available.
  static absl::StatusOr<std::unique_ptr<DeviceStaging>> Create(const DeviceStagingOptions& options,
                                                               FlatBuffers* host,
                                                               std::vector<torch::Tensor>& params,
                                                               const SlicePlan& plan);
  ~DeviceStaging();

  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // `grad` (on the device) into the host gradient buffer from `offset` on; returns at once.
  // `ready` runs on the staging thread once the host buffer holds it.
  void GradientToHost(int64_t offset, const torch::Tensor& grad, std::function<void()> ready);

  // Returns once every copy GradientToHost issued has completed and its `ready` has run.
  void Drain();

  // The host parameter values [offset, offset + count) to the device, ahead of the work that
  // reads them (a block's forward pass); the calling thread does not wait.
  void ParamsToDevice(int64_t offset, int64_t count);

  // The flat parameter buffer on the device.
  const torch::Tensor& device_params() const { return device_params_; }

  // Stops the staging thread after the copies issued so far; safe to call twice.
  void Shutdown();

 private:
  struct Pending {
    std::unique_ptr<CopyFence> fence;
    std::function<void()> ready;
  };
  explicit DeviceStaging(std::shared_ptr<CopyEngine> engine);
  void Loop();

  const std::shared_ptr<CopyEngine> engine_;
  torch::Tensor host_params_;
  torch::Tensor host_grads_;
  torch::Tensor device_params_;

  absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  int64_t issued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace p3

#endif  // P3_WORKER_DEVICE_STAGING_H_
