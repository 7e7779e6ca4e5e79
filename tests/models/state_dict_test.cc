// State dicts in torch.save's format: round trip, names, views, and the mismatch errors.
// (Python's side is tests/models/pytorch_interop_test.sh.)
#include "models/state_dict.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "p3/base/file_util.h"
#include "tests/testing/temp_dir.h"

namespace p3::models {
namespace {

// Conv + BatchNorm + Linear, registered as torchvision would name them.
struct NetImpl : torch::nn::Module {
  explicit NetImpl(int64_t classes = 3) {
    conv =
        register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 4, 3).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    fc = register_module("fc", torch::nn::Linear(4, classes));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc(torch::relu(bn(conv(x))).mean({2, 3}));
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

std::string Message(const absl::Status& s) { return std::string(s.message()); }

CATCH_TEST_CASE("ModuleState names parameters and buffers as PyTorch's state_dict() does") {
  Net net;
  std::vector<std::string> names;
  for (const auto& [name, tensor] : ModuleState(*net)) names.push_back(name);
  const std::vector<std::string> expected = {"conv.weight",    "bn.weight",
                                             "bn.bias",        "bn.running_mean",
                                             "bn.running_var", "bn.num_batches_tracked",
                                             "fc.weight",      "fc.bias"};
  CATCH_CHECK(names == expected);
  CATCH_CHECK(ModuleState(*net)[5].second.scalar_type() == torch::kInt64);
}

CATCH_TEST_CASE("a saved state dict loads back equal, BatchNorm buffers included") {
  const std::string dir = testing::FreshDir("state_dict_1");
  const std::string path = dir + "/net.pt";
  torch::manual_seed(3);
  Net a;
  a->train();
  for (int i = 0; i < 3; ++i) a->forward(torch::randn({5, 2, 6, 6}));  // moves the buffers
  CATCH_REQUIRE(a->bn->num_batches_tracked.item<int64_t>() == 3);
  CATCH_REQUIRE(SaveStateDict(*a, path).ok());

  torch::manual_seed(4);
  Net b;
  CATCH_REQUIRE(LoadStateDict(path, *b).ok());
  const StateDict sa = ModuleState(*a);
  const StateDict sb = ModuleState(*b);
  CATCH_REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    CATCH_CHECK(sa[i].first == sb[i].first);
    CATCH_CHECK(sa[i].second.scalar_type() == sb[i].second.scalar_type());
    CATCH_CHECK(torch::equal(sa[i].second, sb[i].second));
  }
  a->eval();
  b->eval();
  const torch::Tensor x = torch::randn({2, 2, 6, 6});
  CATCH_CHECK(torch::equal(a->forward(x), b->forward(x)));
}

CATCH_TEST_CASE("a parameter that views a larger buffer is written alone") {
  const std::string dir = testing::FreshDir("state_dict_2");
  torch::Tensor big = torch::arange(1000000, torch::kFloat32);
  StateDict state = {{"w", big.narrow(0, 10, 6).view({2, 3})}};
  const std::string path = dir + "/view.pt";
  CATCH_REQUIRE(WriteStateDict(state, path).ok());
  CATCH_CHECK(std::filesystem::file_size(path) < 100000);  // not the 4 MB buffer
  absl::StatusOr<StateDict> read = ReadStateDict(path);
  CATCH_REQUIRE(read.ok());
  CATCH_REQUIRE(read->size() == 1);
  CATCH_CHECK(read->front().first == "w");
  CATCH_CHECK(
      torch::equal(read->front().second, torch::arange(10, 16).view({2, 3}).to(torch::kFloat32)));
}

CATCH_TEST_CASE(
    "loading refuses the first missing, unexpected or misshapen entry, copying nothing") {
  Net net;
  const torch::Tensor before = net->conv->weight.detach().clone();
  StateDict good;
  for (const auto& [name, tensor] : ModuleState(*net)) good.emplace_back(name, tensor.clone() + 1);

  StateDict missing = good;
  missing.erase(missing.begin() + 3);  // bn.running_mean
  absl::Status s = CopyStateDict(missing, *net);
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Message(s) == "missing \"bn.running_mean\" [4]");

  StateDict unexpected = good;
  unexpected.emplace_back("fc.extra", torch::zeros({2}));
  s = CopyStateDict(unexpected, *net);
  CATCH_CHECK(Message(s) == "unexpected \"fc.extra\" [2]");

  StateDict misshapen = good;
  misshapen[6].second = torch::zeros({5, 4});  // fc.weight is [3, 4]
  s = CopyStateDict(misshapen, *net);
  CATCH_CHECK(Message(s) == "\"fc.weight\": shape [5, 4] in the file, [3, 4] in the model");

  StateDict float_count = good;
  float_count[5].second = torch::zeros({}, torch::kFloat32);  // num_batches_tracked
  s = CopyStateDict(float_count, *net);
  CATCH_CHECK(Message(s).find("bn.num_batches_tracked") != std::string::npos);

  CATCH_CHECK(torch::equal(net->conv->weight, before));
  CATCH_REQUIRE(CopyStateDict(good, *net).ok());
  CATCH_CHECK(torch::equal(net->conv->weight, before + 1));
}

CATCH_TEST_CASE("loading writes into the module's tensors in place, so views stay views") {
  Net net;
  torch::Tensor flat = torch::zeros({net->fc->weight.numel()});
  {
    torch::NoGradGuard no_grad;
    net->fc->weight.set_data(flat.view({3, 4}));
  }
  StateDict state;
  for (const auto& [name, tensor] : ModuleState(*net))
    state.emplace_back(name, torch::ones_like(tensor));
  CATCH_REQUIRE(CopyStateDict(state, *net).ok());
  CATCH_CHECK(flat.sum().item<float>() == 12.0f);
}

CATCH_TEST_CASE("reading a file that is not a torch.save archive is an error naming it") {
  const std::string dir = testing::FreshDir("state_dict_3");
  const std::string path = dir + "/junk.pt";
  CATCH_REQUIRE(WriteFileAtomically(path, "not a zip file").ok());
  absl::StatusOr<StateDict> read = ReadStateDict(path);
  CATCH_CHECK(read.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Message(read.status()).find(path) != std::string::npos);
  read = ReadStateDict(dir + "/absent.pt");
  CATCH_CHECK(read.status().code() == absl::StatusCode::kNotFound);
  Net net;
  absl::Status s = LoadStateDict(path, *net);
  CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace p3::models
