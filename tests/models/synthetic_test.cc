// Synthetic data sets: determinism, shapes, and labels that can be learnt.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <map>

#include "models/synthetic.h"

namespace p3::models {
namespace {

Batch All(const std::shared_ptr<Dataset>& data) {
  std::vector<int64_t> all(data->size());
  for (int64_t i = 0; i < data->size(); ++i) all[i] = i;
  return data->Get(all);
}

Batch Images(int64_t size, uint64_t seed, uint64_t stream = 0) {
  absl::StatusOr<std::shared_ptr<Dataset>> data =
      SyntheticImages(size, /*channels=*/3, /*image_size=*/8, /*num_classes=*/10, seed, stream);
  CATCH_REQUIRE(data.ok());
  return All(*data);
}

Batch Tokens(int64_t size, uint64_t seed, uint64_t stream = 0) {
  absl::StatusOr<std::shared_ptr<Dataset>> data =
      SyntheticTokens(size, /*seq_len=*/6, /*vocab=*/20, seed, stream);
  CATCH_REQUIRE(data.ok());
  return All(*data);
}

CATCH_TEST_CASE("synthetic images: same seed gives identical data, another seed other data") {
  Batch a = Images(100, 5);
  Batch b = Images(100, 5);
  Batch c = Images(100, 6);
  CATCH_CHECK(a.input.sizes() == torch::IntArrayRef({100, 3, 8, 8}));
  CATCH_CHECK(a.target.sizes() == torch::IntArrayRef({100}));
  CATCH_CHECK(torch::equal(a.input, b.input));
  CATCH_CHECK(torch::equal(a.target, b.target));
  CATCH_CHECK(!torch::equal(a.input, c.input));
  CATCH_CHECK(a.target.min().item<int64_t>() >= 0);
  CATCH_CHECK(a.target.max().item<int64_t>() <= 9);
}

CATCH_TEST_CASE("synthetic images are learnable: nearest class mean of train classifies test") {
  Batch train = Images(2000, 3, /*stream=*/0);
  Batch test = Images(500, 3, /*stream=*/1);
  CATCH_CHECK(!torch::equal(train.input.slice(0, 0, 500), test.input));
  torch::Tensor means = torch::zeros({10, 3 * 8 * 8});
  means.index_add_(0, train.target, train.input.reshape({2000, -1}));
  means.div_(torch::bincount(train.target, {}, 10).unsqueeze(1).to(torch::kFloat32));
  torch::Tensor predicted = torch::cdist(test.input.reshape({500, -1}), means).argmin(1);
  double accuracy = predicted.eq(test.target).to(torch::kFloat64).mean().item<double>();
  CATCH_CHECK(accuracy > 0.9);
}

CATCH_TEST_CASE("synthetic tokens: target is a fixed mapping of the reversed source") {
  Batch a = Tokens(300, 9);
  CATCH_CHECK(a.input.sizes() == torch::IntArrayRef({300, 2, 6}));
  CATCH_CHECK(a.target.sizes() == torch::IntArrayRef({300, 6}));
  torch::Tensor source = a.input.select(1, 0);
  torch::Tensor decoder_input = a.input.select(1, 1);
  CATCH_CHECK(source.min().item<int64_t>() >= 2);
  CATCH_CHECK(source.max().item<int64_t>() < 20);
  CATCH_CHECK(
      torch::equal(decoder_input.select(1, 0), torch::full({300}, kBosToken, torch::kInt64)));
  CATCH_CHECK(torch::equal(decoder_input.slice(1, 1, 6), a.target.slice(1, 0, 5)));
  // Same source token, same target token, wherever it occurs, in this and another stream.
  Batch other_stream = Tokens(300, 9, /*stream=*/4);
  std::map<int64_t, int64_t> mapping;
  bool consistent = true;
  for (const Batch* b : {&a, &other_stream}) {
    torch::Tensor source_tokens = b->input.select(1, 0).contiguous();
    auto s = source_tokens.accessor<int64_t, 2>();
    auto t = b->target.accessor<int64_t, 2>();
    for (int64_t i = 0; i < 300; ++i) {
      for (int64_t j = 0; j < 6; ++j) {
        auto [it, inserted] = mapping.emplace(s[i][5 - j], t[i][j]);
        consistent = consistent && it->second == t[i][j];
      }
    }
  }
  CATCH_CHECK(consistent);
  CATCH_CHECK(mapping.size() == 18);
  CATCH_CHECK(torch::equal(Tokens(300, 9).input, a.input));
  CATCH_CHECK(!torch::equal(Tokens(300, 10).input, a.input));
}

CATCH_TEST_CASE("synthetic data sets reject sizes below their minimum") {
  CATCH_CHECK(SyntheticImages(0, 1, 8, 10, 1).status().code() ==
              absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(SyntheticImages(10, 1, 8, 0, 1).status().code() ==
              absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(SyntheticTokens(10, 4, 2, 1).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace p3::models
