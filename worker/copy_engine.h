// How a worker whose model runs on a device (a GPU) moves values between the device and the
// host buffers the transports read and write (worker/flat_buffers.h): copies issued without
// waiting, on streams of their own, ordered after the computation that produced their
// source, each with a fence, so that a gradient's slices wait only for their own copy and
// backward never stalls for a copy.
//
// Example (what DeviceStaging does):
//   std::unique_ptr<CopyEngine> engine = *StreamCopyEngine(torch::Device("cuda:0"));
//   std::unique_ptr<CopyFence> fence = engine->ToHost(host_grad_view, grad);   // returns at once
//   fence->Wait();                                    // on another thread: the values are there
//   engine->ToDevice(device_params_view, host_params_view);  // the next kernels see them
//
// Implementations are used by one thread at a time for ToHost/ToDevice; a fence may be
// waited for on another thread.
#ifndef P3_WORKER_COPY_ENGINE_H_
#define P3_WORKER_COPY_ENGINE_H_

#include <torch/types.h>

#include <memory>

#include "absl/status/statusor.h"

namespace p3 {

// One issued copy: Wait() returns once its destination holds the values.
class CopyFence {
 public:
  virtual ~CopyFence() = default;
  virtual void Wait() = 0;
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;

  // dst (host memory) := src (the device's), after the work already issued on the device
  // that produces src. Returns without waiting; `src` stays alive until the fence is done.
  virtual std::unique_ptr<CopyFence> ToHost(const torch::Tensor& dst, const torch::Tensor& src) = 0;

  // dst (the device's) := src (host memory): work issued on the device afterwards sees the
  // new values. No thread waits for the copy; `src` must not change until that work has run
  // (the protocol guarantees it: see DeviceStaging).
  virtual void ToDevice(const torch::Tensor& dst, const torch::Tensor& src) = 0;
};

// Copies at once, on the calling thread (fences are done when returned): the model and the
// host buffers share the CPU.
std::unique_ptr<CopyEngine> ImmediateCopyEngine();

// Streams and events of `device` (e.g. cuda:0) through libtorch's device-generic interface
// (c10::Stream, c10::Event), so that this compiles against any libtorch and runs device code
// only where the device's libraries are linked: a copy stream for each direction, events
// between them and the compute stream (the device's current stream). FailedPrecondition when
// the device is not available.
absl::StatusOr<std::unique_ptr<CopyEngine>> StreamCopyEngine(const torch::Device& device);

}  // namespace p3

#endif  // P3_WORKER_COPY_ENGINE_H_
