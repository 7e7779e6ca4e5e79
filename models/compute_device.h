// Where and in which precision a worker computes (training.device, training.precision):
// the device a rank uses on a machine with several GPUs, and autocast around the forward
// pass and the loss.
//
// Example:
//   P3_ASSIGN_OR_RETURN(torch::Device device,
//                       ResolveDevice(config.training().device(), rank, CudaDeviceCount()));
//   P3_ASSIGN_OR_RETURN(Precision precision, ParsePrecision(config.training().precision()));
//   {
//     Autocast autocast(device, precision);          // forward and loss in bf16 where safe
//     loss = model.Loss(model.forward(x.to(device)), y.to(device));
//   }
//   loss.backward();                                 // outside autocast, as PyTorch's recipe
//
// ResolveDevice and ParsePrecision are pure; Autocast sets libtorch's thread-local
// autocast state and restores it.
#ifndef P3_MODELS_COMPUTE_DEVICE_H_
#define P3_MODELS_COMPUTE_DEVICE_H_

#include <torch/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace p3 {

// "cpu"; "cuda:<i>"; or "cuda": the machine's GPU rank % `cuda_devices` (ranks on one
// machine are consecutive under launch_cluster's placement, so each takes its own GPU while
// there are enough, and they share them round-robin when there are not). InvalidArgument
// naming training.device for anything else, FailedPrecondition when `cuda_devices` is 0 or
// the index is not below it.
absl::StatusOr<torch::Device> ResolveDevice(const std::string& name, int rank, int cuda_devices);

// The GPUs libtorch sees here (0 with a CPU-only libtorch).
int CudaDeviceCount();

// training.tf32: lets (or forbids) float32 matrix products and convolutions use TF32 on a
// GPU, for the whole process (libtorch's allow_tf32 for cuBLAS and cuDNN).
void SetTf32(bool allowed);

// training.precision: the dtype the forward pass computes in where autocast allows.
enum class Precision { kFp32, kBf16, kFp16 };
absl::StatusOr<Precision> ParsePrecision(const std::string& name);
const char* PrecisionName(Precision precision);

// fp16's dynamic loss scale, as PyTorch's GradScaler: starts at 2^16, halves after an
// iteration whose gradients were not all finite, doubles after `growth_interval` finite
// ones in a row; powers of two, so that scaling and unscaling are exact.
class DynamicLossScale {
 public:
  explicit DynamicLossScale(double initial = 65536.0, int growth_interval = 2000)
      : scale_(initial), growth_interval_(growth_interval) {}
  double scale() const { return scale_; }
  // After an iteration at scale(): whether all its gradients were finite.
  void Update(bool finite) {
    if (!finite) {
      scale_ = scale_ / 2 < 1 ? 1 : scale_ / 2;
      good_ = 0;
    } else if (++good_ >= growth_interval_) {
      scale_ *= 2;
      good_ = 0;
    }
  }

 private:
  double scale_;
  const int growth_interval_;
  int good_ = 0;
};

// libtorch's autocast for `device`'s type in `precision` while it lives (nothing for fp32).
// The parameters, their gradients, the servers' master values and optimizer state stay
// float32 (training.precision is independent of scheduling.wire_dtype).
class Autocast {
 public:
  Autocast(const torch::Device& device, Precision precision);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool was_enabled_ = false;
  torch::ScalarType was_dtype_ = torch::kFloat32;
};

}  // namespace p3

#endif  // P3_MODELS_COMPUTE_DEVICE_H_
