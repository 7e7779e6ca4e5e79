// training.device and training.precision (models/compute_device.h): which GPU a rank takes,
// the errors that name the field, and autocast switched on and back off.
#include "models/compute_device.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>

namespace p3 {
namespace {

CATCH_TEST_CASE("cuda gives each rank of a machine its own GPU, round-robin when there are few") {
  for (int rank = 0; rank < 5; ++rank) {
    absl::StatusOr<torch::Device> d = ResolveDevice("cuda", rank, /*cuda_devices=*/2);
    CATCH_REQUIRE(d.ok());
    CATCH_CHECK(d->is_cuda());
    CATCH_CHECK(d->index() == rank % 2);
  }
  absl::StatusOr<torch::Device> fixed = ResolveDevice("cuda:3", 0, 4);
  CATCH_REQUIRE(fixed.ok());
  CATCH_CHECK(fixed->index() == 3);
  absl::StatusOr<torch::Device> cpu = ResolveDevice("cpu", 7, 0);
  CATCH_REQUIRE(cpu.ok());
  CATCH_CHECK(cpu->is_cpu());
}

CATCH_TEST_CASE("a device that is not there, or not a device, names training.device") {
  absl::StatusOr<torch::Device> none = ResolveDevice("cuda", 0, 0);
  CATCH_CHECK(none.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(none.status().message().find("training.device") != std::string::npos);
  absl::StatusOr<torch::Device> past = ResolveDevice("cuda:2", 0, 2);
  CATCH_CHECK(past.status().code() == absl::StatusCode::kFailedPrecondition);
  CATCH_CHECK(past.status().message().find("sees 2 GPU(s)") != std::string::npos);
  for (const std::string& bad : {"gpu", "cuda:", "cuda:-1", "cuda:x"}) {
    CATCH_CAPTURE(bad);
    absl::StatusOr<torch::Device> d = ResolveDevice(bad, 0, 8);
    CATCH_CHECK(d.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(d.status().message().find("allowed: cpu, cuda, cuda:<index>") != std::string::npos);
  }
}

CATCH_TEST_CASE("precision names parse, and anything else names the field") {
  CATCH_CHECK(*ParsePrecision("fp32") == Precision::kFp32);
  CATCH_CHECK(*ParsePrecision("bf16") == Precision::kBf16);
  CATCH_CHECK(*ParsePrecision("fp16") == Precision::kFp16);
  CATCH_CHECK(std::string(PrecisionName(Precision::kBf16)) == "bf16");
  CATCH_CHECK(ParsePrecision("float8").status().message().find("training.precision") !=
              std::string::npos);
}

CATCH_TEST_CASE("bf16 autocast computes a linear layer in bfloat16 while it lives, then not") {
  torch::nn::Linear linear(8, 4);
  const torch::Tensor x = torch::randn({2, 8});
  {
    Autocast autocast(torch::kCPU, Precision::kBf16);
    CATCH_CHECK(linear->forward(x).scalar_type() == torch::kBFloat16);
  }
  CATCH_CHECK(linear->forward(x).scalar_type() == torch::kFloat32);
  {
    Autocast autocast(torch::kCPU, Precision::kFp32);
    CATCH_CHECK(linear->forward(x).scalar_type() == torch::kFloat32);
  }
  // The parameters and their gradients stay float32.
  {
    Autocast autocast(torch::kCPU, Precision::kBf16);
    linear->forward(x).sum().backward();
  }
  CATCH_CHECK(linear->weight.grad().scalar_type() == torch::kFloat32);
}

CATCH_TEST_CASE("the dynamic loss scale halves after an overflow and doubles after clean runs") {
  DynamicLossScale scale(/*initial=*/1024, /*growth_interval=*/3);
  CATCH_CHECK(scale.scale() == 1024);
  scale.Update(false);
  CATCH_CHECK(scale.scale() == 512);
  scale.Update(true);
  scale.Update(true);
  CATCH_CHECK(scale.scale() == 512);
  scale.Update(true);  // the third clean one in a row
  CATCH_CHECK(scale.scale() == 1024);
  scale.Update(true);
  scale.Update(false);  // an overflow restarts the count
  scale.Update(true);
  scale.Update(true);
  CATCH_CHECK(scale.scale() == 512);
  DynamicLossScale floor(2, 100);
  floor.Update(false);
  floor.Update(false);
  CATCH_CHECK(floor.scale() == 1);  // never below 1
}

}  // namespace
}  // namespace p3
