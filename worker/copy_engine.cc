#include "worker/copy_engine.h"

#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

class DoneFence : public CopyFence {
 public:
  void Wait() override {}
};

class Immediate : public CopyEngine {
 public:
  std::unique_ptr<CopyFence> ToHost(const torch::Tensor& dst, const torch::Tensor& src) override {
    torch::NoGradGuard no_grad;
    dst.copy_(src);
    return std::make_unique<DoneFence>();
  }
  void ToDevice(const torch::Tensor& dst, const torch::Tensor& src) override {
    torch::NoGradGuard no_grad;
    dst.copy_(src);
  }
};

// An event recorded on the copy stream after one copy. It holds the copy's source, so that
// the device's caching allocator cannot hand its memory to other work before the copy has
// read it.
class StreamFence : public CopyFence {
 public:
  StreamFence(c10::DeviceType type, c10::Stream stream, torch::Tensor source)
      : event_(type), stream_(stream), source_(std::move(source)) {
    event_.record(stream_);
  }
  void Wait() override {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    event_.synchronize();
#else
    // Older libtorch's c10::Event cannot be waited for on the host: the copy stream is
    // (its copies complete in order, so this waits for this copy and those issued since).
    c10::impl::VirtualGuardImpl(stream_.device_type()).synchronizeStream(stream_);
#endif
    source_ = torch::Tensor();
  }

 private:
  c10::Event event_;
  c10::Stream stream_;
  torch::Tensor source_;
};

class Streams : public CopyEngine {
 public:
  explicit Streams(const torch::Device& device)
      : device_(device),
        guard_(device.type()),
        to_host_(guard_.getStreamFromGlobalPool(device)),
        to_device_(guard_.getStreamFromGlobalPool(device)) {}

  std::unique_ptr<CopyFence> ToHost(const torch::Tensor& dst, const torch::Tensor& src) override {
    torch::NoGradGuard no_grad;
    // The copy waits on the device for the computation issued so far (that made `src`),
    // not the host.
    c10::Event produced(device_.type());
    produced.record(guard_.getStream(device_));
    produced.block(to_host_);
    {
      c10::StreamGuard on(to_host_);
      dst.copy_(src, /*non_blocking=*/true);
    }
    return std::make_unique<StreamFence>(device_.type(), to_host_, src);
  }

  void ToDevice(const torch::Tensor& dst, const torch::Tensor& src) override {
    torch::NoGradGuard no_grad;
    {
      c10::StreamGuard on(to_device_);
      dst.copy_(src, /*non_blocking=*/true);
    }
    // The computation issued from now on waits for the copy, on the device.
    c10::Event uploaded(device_.type());
    uploaded.record(to_device_);
    uploaded.block(guard_.getStream(device_));
  }

 private:
  const torch::Device device_;
  const c10::impl::VirtualGuardImpl guard_;
  const c10::Stream to_host_;
  const c10::Stream to_device_;
};

}  // namespace

std::unique_ptr<CopyEngine> ImmediateCopyEngine() { return std::make_unique<Immediate>(); }

absl::StatusOr<std::unique_ptr<CopyEngine>> StreamCopyEngine(const torch::Device& device) {
  if (device.is_cpu()) {
    return absl::InvalidArgumentError("the CPU has no copy streams: use ImmediateCopyEngine");
  }
  try {
    torch::Device indexed = device;
    if (!indexed.has_index()) indexed = torch::Device(device.type(), 0);
    // Fails (c10::Error) when the device's libraries are not linked or it is not there.
    torch::empty({1}, torch::TensorOptions().device(indexed));
    return std::unique_ptr<CopyEngine>(std::make_unique<Streams>(indexed));
  } catch (const c10::Error& e) {
    return absl::FailedPreconditionError(absl::StrCat("device ", device.str(),
                                                      " is not available: ",
                                                      e.what_without_backtrace()));
  }
}

}  // namespace p3
