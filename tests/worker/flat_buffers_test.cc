// FlatBuffers' gradient (worker/flat_buffers.h): kept as an alias of autograd's tensor when
// allowed, else copied into the flat buffer; and the alias does not make autograd clone its
// tensor into .grad (the copy the alias saves would come back there).
#include "worker/flat_buffers.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <vector>

namespace p3 {
namespace {

CATCH_TEST_CASE("a contiguous float32 gradient is kept, not copied, when an alias is allowed") {
  FlatBuffers buffers = FlatBuffers::Allocate(10, /*shared=*/false, /*rank=*/0);
  const torch::Tensor grad = torch::arange(4, torch::kFloat32);
  buffers.SetGradient(1, /*offset=*/6, grad, /*alias=*/true);
  CATCH_CHECK(buffers.aliased_gradient(1) == grad.data_ptr<float>());
  CATCH_CHECK(buffers.aliased_gradient(0) == nullptr);  // never set
  CATCH_CHECK(buffers.gradient(1, 6) == grad.data_ptr<float>());
  // Nothing was copied: the gradient buffer's memory is not even allocated.
  CATCH_CHECK(buffers.grads() == nullptr);
  CATCH_CHECK(buffers.gradient(0, 0) == nullptr);
}

CATCH_TEST_CASE(
    "the private gradient buffer is allocated, zero-filled, by the first copied gradient or "
    "by GradientBuffer(), and then stays where it is") {
  FlatBuffers buffers = FlatBuffers::Allocate(8, /*shared=*/false, /*rank=*/0);
  CATCH_REQUIRE(buffers.grads() == nullptr);
  buffers.SetGradient(1, /*offset=*/4, torch::full({2}, 5.0f), /*alias=*/false);
  const float* buffer = buffers.grads();
  CATCH_REQUIRE(buffer != nullptr);
  CATCH_CHECK(buffer[3] == 0.0f);
  CATCH_CHECK(buffer[4] == 5.0f);
  CATCH_CHECK(buffer[5] == 5.0f);
  CATCH_CHECK(buffer[6] == 0.0f);
  CATCH_CHECK(buffers.gradient(1, 4) == buffer + 4);
  CATCH_CHECK(buffers.GradientBuffer() == buffer);
  buffers.SetGradient(0, 0, torch::full({4}, 1.0f), /*alias=*/false);
  CATCH_CHECK(buffers.grads() == buffer);
  CATCH_CHECK(buffer[0] == 1.0f);

  FlatBuffers staged = FlatBuffers::Allocate(3, /*shared=*/false, /*rank=*/0);
  float* writable = staged.GradientBuffer();
  CATCH_REQUIRE(writable != nullptr);
  CATCH_CHECK(staged.grads() == writable);
  CATCH_CHECK(writable[2] == 0.0f);
}

CATCH_TEST_CASE(
    "without an alias, or for a non-contiguous or non-float32 gradient, the values are "
    "copied into the buffer and no alias is left") {
  FlatBuffers buffers = FlatBuffers::Allocate(12, /*shared=*/false, /*rank=*/0);
  buffers.SetGradient(0, 0, torch::full({4}, 1.0f), /*alias=*/true);
  CATCH_REQUIRE(buffers.aliased_gradient(0) != nullptr);
  buffers.SetGradient(0, 0, torch::full({4}, 2.0f), /*alias=*/false);
  CATCH_CHECK(buffers.aliased_gradient(0) == nullptr);
  CATCH_CHECK(buffers.grads()[3] == 2.0f);
  const torch::Tensor strided = torch::arange(8, torch::kFloat32).view({4, 2}).t();
  buffers.SetGradient(1, 4, strided, /*alias=*/true);
  CATCH_CHECK(buffers.aliased_gradient(1) == nullptr);
  CATCH_CHECK(buffers.grads()[5] == 2.0f);  // strided's second value: row 0, column 1
  buffers.SetGradient(2, 8, torch::full({4}, 3.0, torch::kFloat64), /*alias=*/true);
  CATCH_CHECK(buffers.aliased_gradient(2) == nullptr);
  CATCH_CHECK(buffers.grads()[11] == 3.0f);
}

CATCH_TEST_CASE("autograd hands its gradient to .grad without a clone while the alias is kept") {
  FlatBuffers buffers = FlatBuffers::Allocate(1000, /*shared=*/false, /*rank=*/0);
  torch::Tensor p = torch::full({1000}, 0.5f).requires_grad_(true);
  p.register_hook([&buffers](const torch::Tensor& g) {
    buffers.SetGradient(0, 0, g, /*alias=*/true);
  });
  (p.mean() * 2).backward();
  CATCH_REQUIRE(buffers.aliased_gradient(0) != nullptr);
  CATCH_CHECK(p.grad().data_ptr<float>() == buffers.aliased_gradient(0));
  CATCH_CHECK(buffers.aliased_gradient(0)[999] == 2.0f / 1000);
}

}  // namespace
}  // namespace p3
