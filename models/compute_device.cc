#include "models/compute_device.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

// libtorch 2.4 made autocast's state per device type; 1.13 has one flag and dtype for CUDA
// and one for the CPU.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool AutocastEnabled(bool cuda) {
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
}
torch::ScalarType AutocastDtype(bool cuda) {
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
}
void SetAutocast(bool cuda, bool enabled, torch::ScalarType dtype) {
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, dtype);
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, enabled);
}
#else
bool AutocastEnabled(bool cuda) {
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
torch::ScalarType AutocastDtype(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void SetAutocast(bool cuda, bool enabled, torch::ScalarType dtype) {
  if (cuda) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
}
#endif

}  // namespace

absl::StatusOr<torch::Device> ResolveDevice(const std::string& name, int rank, int cuda_devices) {
  if (name.empty() || name == "cpu") return torch::Device(torch::kCPU);
  int index = -1;
  if (name == "cuda") {
    if (cuda_devices < 1) {
      return absl::FailedPreconditionError(
          "training.device: \"cuda\", but libtorch sees no GPU here (a CPU-only libtorch, or "
          "no GPU visible; docs/building.md, \"Another libtorch\")");
    }
    index = rank % cuda_devices;
  } else if (absl::StartsWith(name, "cuda:")) {
    if (!absl::SimpleAtoi(name.substr(5), &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training.device: \"", name, "\" is not a device; allowed: cpu, cuda, cuda:<index>"));
    }
    if (index >= cuda_devices) {
      return absl::FailedPreconditionError(absl::StrCat("training.device: \"", name,
                                                        "\", but libtorch sees ", cuda_devices,
                                                        " GPU(s) here"));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.device: \"", name, "\" is not a device; allowed: cpu, cuda, cuda:<index>"));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void SetTf32(bool allowed) {
  at::globalContext().setAllowTF32CuBLAS(allowed);
  at::globalContext().setAllowTF32CuDNN(allowed);
}

int CudaDeviceCount() { return static_cast<int>(torch::cuda::device_count()); }

absl::StatusOr<Precision> ParsePrecision(const std::string& name) {
  if (name.empty() || name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  return absl::InvalidArgumentError(
      absl::StrCat("training.precision: \"", name, "\"; allowed: fp32, bf16, fp16"));
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "fp32";
}

Autocast::Autocast(const torch::Device& device, Precision precision) {
  if (precision == Precision::kFp32) return;
  active_ = true;
  cuda_ = device.is_cuda();
  was_enabled_ = AutocastEnabled(cuda_);
  was_dtype_ = AutocastDtype(cuda_);
  SetAutocast(cuda_, true, precision == Precision::kBf16 ? torch::kBFloat16 : torch::kHalf);
}

Autocast::~Autocast() {
  if (!active_) return;
  SetAutocast(cuda_, was_enabled_, was_dtype_);
  at::autocast::clear_cache();
}

}  // namespace p3
