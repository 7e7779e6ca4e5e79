// Every zoo model runs where its parameters are: a block that creates a tensor on the CPU
// (instead of on its input's or its parameters' device) fails on a GPU with "Expected all
// tensors to be on the same device". libtorch's `meta` device catches that without a GPU:
// meta tensors have shapes and no data, and mixing them with CPU tensors throws the same
// error. So each model is moved to meta and run forward, block by block, with its loss.
//
// libtorch 1.13's Module::to(kMeta) refuses (set_data allows only CPU <-> CUDA and the like),
// so MoveToMeta makes each parameter and buffer a meta tensor in place, as set_data would:
// the modules' own handles (a Linear's `weight`) share the TensorImpl and follow. Where
// libtorch 1.13's C++ library has no meta kernel (Python registers its own), the test
// registers one: the output's shape, computed as the CPU kernel would.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>

#include "models/zoo.h"

namespace p3::models {
namespace {

torch::Tensor MetaConvolution(const torch::Tensor& input, const torch::Tensor& weight,
                              const c10::optional<torch::Tensor>& /*bias*/,
                              torch::IntArrayRef stride, torch::IntArrayRef padding,
                              torch::IntArrayRef dilation, bool transposed,
                              torch::IntArrayRef /*output_padding*/, int64_t /*groups*/) {
  TORCH_CHECK(!transposed, "the meta convolution of device_test is not transposed");
  std::vector<int64_t> sizes = {input.size(0), weight.size(0)};
  for (int64_t d = 2; d < input.dim(); ++d) {
    const int64_t i = d - 2;
    sizes.push_back((input.size(d) + 2 * padding[i] - dilation[i] * (weight.size(d) - 1) - 1) /
                        stride[i] +
                    1);
  }
  return torch::empty(sizes, input.options());
}

torch::Tensor MetaIndexSelect(const torch::Tensor& self, int64_t dim, const torch::Tensor& index) {
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[dim < 0 ? dim + self.dim() : dim] = index.numel();
  return torch::empty(sizes, self.options());
}

torch::Tensor MetaRelu(const torch::Tensor& self) { return torch::empty_like(self); }

torch::Tensor& MetaReluInPlace(torch::Tensor& self) { return self; }

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> MetaBatchNorm(
    const torch::Tensor& input, const c10::optional<torch::Tensor>& /*weight*/,
    const c10::optional<torch::Tensor>& /*bias*/,
    const c10::optional<torch::Tensor>& /*running_mean*/,
    const c10::optional<torch::Tensor>& /*running_var*/, bool /*training*/,
    double /*momentum*/, double /*eps*/) {
  const torch::Tensor stats = torch::empty({input.size(1)}, input.options());
  return {torch::empty_like(input), stats, torch::empty_like(stats)};
}

torch::Tensor MetaAdaptiveAvgPool2d(const torch::Tensor& self, c10::SymIntArrayRef output_size) {
  std::vector<int64_t> sizes = self.sizes().vec();
  const c10::IntArrayRef out = c10::asIntArrayRefSlow(output_size);
  sizes[sizes.size() - 2] = out[0];
  sizes[sizes.size() - 1] = out[1];
  return torch::empty(sizes, self.options());
}

// MultiheadAttention asks torch::equal(query, key) to pick its projection path; meta
// tensors have no values, so the same tensor stands for equal ones (the attention's callers
// pass one tensor for self-attention). Every path gives the same shapes.
bool MetaEqual(const torch::Tensor& self, const torch::Tensor& other) {
  return self.is_same(other);
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("equal", MetaEqual);
  m.impl("relu", MetaRelu);
  m.impl("relu_", MetaReluInPlace);
  m.impl("native_batch_norm", MetaBatchNorm);
  m.impl("_adaptive_avg_pool2d", MetaAdaptiveAvgPool2d);
  m.impl("convolution_overrideable", MetaConvolution);
  m.impl("index_select", MetaIndexSelect);
}

struct Case {
  ModelOptions options;
  torch::Tensor input;
  torch::Tensor target;
};

// A small input of the shape each model takes, on the meta device.
Case MetaCase(const std::string& name) {
  const auto meta = torch::TensorOptions().device(torch::kMeta);
  Case c;
  c.options.name = name;
  if (name == "seq2seq_lstm" || name == "transformer") {
    c.options.vocab_size = 50;
    c.input = torch::zeros({2, 2, 5}, meta.dtype(torch::kInt64));
    c.target = torch::zeros({2, 5}, meta.dtype(torch::kInt64));
    return c;
  }
  c.target = torch::zeros({2}, meta.dtype(torch::kInt64));
  if (name == "mlp") {
    c.input = torch::zeros({2, 12}, meta);
  } else if (name == "small_cnn" || name == "row_lstm") {
    c.input = torch::zeros({2, 1, 28, 28}, meta);
  } else {
    const int64_t size = name == "inception_v3" ? 75 : 32;
    c.input = torch::zeros({2, 3, size, size}, meta);
  }
  return c;
}

void MoveToMeta(torch::nn::Module& model) {
  auto to_meta = [](const torch::Tensor& t) {
    const torch::Tensor meta = torch::empty(t.sizes(), t.options().device(torch::kMeta));
    t.unsafeGetTensorImpl()->shallow_copy_from(meta.getIntrusivePtr());
  };
  for (const torch::Tensor& p : model.parameters()) to_meta(p);
  for (const torch::Tensor& b : model.buffers()) to_meta(b);
}

CATCH_TEST_CASE("every zoo model's forward and loss run on its parameters' device") {
  for (const std::string& name : ModelNames()) {
    CATCH_CAPTURE(name);
    Case c = MetaCase(name);
    absl::StatusOr<std::shared_ptr<BlockModel>> model = CreateModel(c.options);
    CATCH_REQUIRE(model.ok());
    MoveToMeta(**model);
    CATCH_REQUIRE((*model)->parameters()[0].device().type() == torch::kMeta);
    std::string error;
    try {
      torch::Tensor x = c.input;
      for (int64_t b = 0; b < (*model)->num_blocks(); ++b) x = (*model)->ForwardBlock(b, x);
      torch::Tensor loss = (*model)->Loss(x, c.target);
      CATCH_CHECK(loss.device().type() == torch::kMeta);
      CATCH_CHECK(loss.dim() == 0);
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
    }
    CATCH_CHECK(error == "");
  }
}

CATCH_TEST_CASE("the meta check catches a tensor made on the CPU") {
  const torch::Tensor on_meta = torch::zeros({2, 3}, torch::TensorOptions().device(torch::kMeta));
  CATCH_CHECK_THROWS_AS(on_meta + torch::ones({2, 3}), c10::Error);
}

}  // namespace
}  // namespace p3::models
