// The zoo's small models: block structure, parameter ownership, determinism, errors.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>

#include "models/state_dict.h"
#include "models/zoo.h"
#include "tests/models/models_test_util.h"
#include "tests/testing/temp_dir.h"

namespace p3::models {
namespace {

using testing::BlockNames;
using testing::CheckBlocksPartitionParameters;
using testing::CountParameters;
using testing::Create;

CATCH_TEST_CASE("unknown model name is InvalidArgument naming the allowed names") {
  ModelOptions options;
  options.name = "resnet-9000";
  absl::StatusOr<std::shared_ptr<BlockModel>> model = CreateModel(options);
  CATCH_REQUIRE(!model.ok());
  CATCH_CHECK(model.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(model.status().message());
  CATCH_CHECK(message.find("resnet-9000") != std::string::npos);
  CATCH_CHECK(message.find("small_cnn") != std::string::npos);
  for (const std::string& name : ModelNames()) {
    CATCH_CHECK(message.find(name) != std::string::npos);
  }
  CATCH_CHECK(ModelNames().size() == 9);
}

CATCH_TEST_CASE("bad sizes are InvalidArgument") {
  ModelOptions options;
  options.num_classes = 0;
  CATCH_CHECK(CreateModel(options).status().code() == absl::StatusCode::kInvalidArgument);
  options = ModelOptions();
  options.image_size = 30;  // small_cnn pools twice by 2
  CATCH_CHECK(CreateModel(options).status().code() == absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE("small_cnn has the default experiment's four blocks and sizes") {
  std::shared_ptr<BlockModel> model = Create(ModelOptions());
  CATCH_CHECK(BlockNames(*model) == std::vector<std::string>{"conv1", "conv2", "fc1", "fc2"});
  CATCH_CHECK(CountParameters(*model) == 215370);
  std::vector<torch::Tensor> fc1 = model->BlockParameters(2);
  CATCH_REQUIRE(fc1.size() == 2);
  CATCH_CHECK(fc1[0].numel() == 32 * 7 * 7 * 128);
  CATCH_CHECK(fc1[1].numel() == 128);
  CheckBlocksPartitionParameters(*model);
}

CATCH_TEST_CASE("small_cnn runs block by block like forward and trains every parameter") {
  std::shared_ptr<BlockModel> model = Create(ModelOptions());
  torch::Tensor x = torch::randn({3, 1, 28, 28});
  torch::Tensor y = x;
  for (int64_t i = 0; i < model->num_blocks(); ++i) y = model->ForwardBlock(i, y);
  CATCH_CHECK(y.sizes() == torch::IntArrayRef({3, 10}));
  CATCH_CHECK(torch::allclose(y, model->forward(x)));
  model->Loss(y, torch::tensor({1, 2, 3}, torch::kInt64)).backward();
  for (const torch::Tensor& p : model->parameters()) {
    CATCH_REQUIRE(p.grad().defined());
    CATCH_CHECK(p.grad().abs().sum().item<float>() > 0);
  }
}

CATCH_TEST_CASE("mlp has three blocks, some tensors above and some below 100 parameters") {
  ModelOptions options;
  options.name = "mlp";
  std::shared_ptr<BlockModel> model = Create(options);
  CATCH_CHECK(BlockNames(*model) == std::vector<std::string>{"fc1", "fc2", "fc3"});
  CATCH_CHECK(CountParameters(*model) == 12 * 40 + 40 + 40 * 30 + 30 + 30 * 10 + 10);
  CheckBlocksPartitionParameters(*model);
  CATCH_CHECK(model->forward(torch::randn({4, 12})).sizes() == torch::IntArrayRef({4, 10}));
}

CATCH_TEST_CASE("mlp flattens images when image_size is given") {
  ModelOptions options;
  options.name = "mlp";
  options.image_size = 28;
  options.in_channels = 1;
  options.num_classes = 5;
  std::shared_ptr<BlockModel> model = Create(options);
  CATCH_CHECK(model->forward(torch::randn({2, 1, 28, 28})).sizes() == torch::IntArrayRef({2, 5}));
  options.image_size = 0;
  options.in_channels = 7;
  CATCH_CHECK(Create(options)->forward(torch::randn({2, 7})).sizes() == torch::IntArrayRef({2, 5}));
}

CATCH_TEST_CASE("same seed gives identical parameters, another seed different ones") {
  for (const std::string name : {"small_cnn", "mlp", "row_lstm"}) {
    ModelOptions options;
    options.name = name;
    options.seed = 42;
    std::vector<torch::Tensor> a = Create(options)->parameters();
    torch::manual_seed(12345);  // global state in between must not matter
    std::vector<torch::Tensor> b = Create(options)->parameters();
    options.seed = 43;
    std::vector<torch::Tensor> c = Create(options)->parameters();
    CATCH_REQUIRE(a.size() == b.size());
    bool all_equal = true;
    bool any_differs = false;
    for (size_t i = 0; i < a.size(); ++i) {
      all_equal = all_equal && torch::equal(a[i], b[i]);
      any_differs = any_differs || !torch::equal(a[i], c[i]);
    }
    CATCH_CHECK(all_equal);
    CATCH_CHECK(any_differs);
  }
}

CATCH_TEST_CASE("row_lstm has four LSTM blocks and a classifier, 33,610 parameters") {
  ModelOptions options;
  options.name = "row_lstm";
  std::shared_ptr<BlockModel> model = Create(options);
  CATCH_CHECK(BlockNames(*model) ==
              std::vector<std::string>{"lstm.0", "lstm.1", "lstm.2", "lstm.3", "fc"});
  // LSTM(in, 32): 4*32*(in + 32) weights + 2*4*32 biases; in = 28, then 32.
  const int64_t first = 4 * 32 * (28 + 32) + 2 * 4 * 32;
  const int64_t later = 4 * 32 * (32 + 32) + 2 * 4 * 32;
  CATCH_CHECK(CountParameters(*model) == first + 3 * later + 32 * 10 + 10);
  CATCH_CHECK(CountParameters(*model) == 33610);
  CheckBlocksPartitionParameters(*model);
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.key());
  CATCH_REQUIRE(names.size() == 4 * 4 + 2);
  CATCH_CHECK(names.front() == "lstm0.weight_ih_l0");
  CATCH_CHECK(names.back() == "fc.bias");
}

CATCH_TEST_CASE("row_lstm runs block by block like forward and trains every parameter") {
  ModelOptions options;
  options.name = "row_lstm";
  std::shared_ptr<BlockModel> model = Create(options);
  torch::Tensor x = torch::randn({3, 1, 28, 28});
  torch::Tensor y = x;
  for (int64_t i = 0; i < model->num_blocks(); ++i) {
    y = model->ForwardBlock(i, y);
    if (i + 1 < model->num_blocks()) {
      CATCH_CHECK(y.sizes() == torch::IntArrayRef({3, 28, 32}));  // [B, rows, hidden]
    }
  }
  CATCH_CHECK(y.sizes() == torch::IntArrayRef({3, 10}));
  CATCH_CHECK(torch::allclose(y, model->forward(x)));
  model->Loss(y, torch::tensor({1, 2, 3}, torch::kInt64)).backward();
  for (const auto& item : model->named_parameters()) {
    CATCH_CAPTURE(item.key());
    CATCH_REQUIRE(item.value().grad().defined());
    CATCH_CHECK(item.value().grad().abs().sum().item<float>() > 0);
  }
}

CATCH_TEST_CASE("row_lstm reads an image row by row: step t sees rows 0..t only") {
  ModelOptions options;
  options.name = "row_lstm";
  std::shared_ptr<BlockModel> model = Create(options);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 1, 28, 28});
  torch::Tensor changed = x.clone();
  changed.select(2, 20).add_(1.0);  // row 20 of every image
  torch::Tensor a = model->ForwardBlock(0, x);
  torch::Tensor b = model->ForwardBlock(0, changed);
  CATCH_CHECK(torch::equal(a.narrow(1, 0, 20), b.narrow(1, 0, 20)));  // steps 0..19
  CATCH_CHECK(!torch::allclose(a.narrow(1, 20, 8), b.narrow(1, 20, 8)));
}

CATCH_TEST_CASE("row_lstm takes other image sizes and channels, rejects empty sizes") {
  ModelOptions options;
  options.name = "row_lstm";
  options.image_size = 12;
  options.in_channels = 3;
  options.num_classes = 4;
  std::shared_ptr<BlockModel> model = Create(options);
  CATCH_CHECK(model->forward(torch::randn({2, 3, 12, 12})).sizes() == torch::IntArrayRef({2, 4}));
  CATCH_CHECK(model->BlockParameters(0)[0].size(1) == 3 * 12);  // weight_ih of lstm0
}

CATCH_TEST_CASE("row_lstm's state dict has PyTorch's LSTM names and loads back equal") {
  // What the cluster modes write as model.pt (output.save_model) and read (init_from).
  ModelOptions options;
  options.name = "row_lstm";
  std::shared_ptr<BlockModel> a = Create(options);
  const StateDict state = ModuleState(*a);
  CATCH_REQUIRE(state.size() == 18);  // 4 per LSTM layer (no buffers), 2 for fc
  CATCH_CHECK(state[0].first == "lstm0.weight_ih_l0");
  CATCH_CHECK(state[1].first == "lstm0.weight_hh_l0");
  CATCH_CHECK(state[3].first == "lstm0.bias_hh_l0");
  CATCH_CHECK(state[0].second.sizes() == torch::IntArrayRef({4 * 32, 28}));
  const std::string path = ::p3::testing::FreshDir("zoo_row_lstm") + "/model.pt";
  CATCH_REQUIRE(SaveStateDict(*a, path).ok());
  options.seed = 2;
  std::shared_ptr<BlockModel> b = Create(options);
  const torch::Tensor x = torch::randn({2, 1, 28, 28});
  CATCH_CHECK_FALSE(torch::allclose(a->forward(x), b->forward(x)));
  CATCH_REQUIRE(LoadStateDict(path, *b).ok());
  CATCH_CHECK(torch::equal(a->forward(x), b->forward(x)));
}

}  // namespace
}  // namespace p3::models
