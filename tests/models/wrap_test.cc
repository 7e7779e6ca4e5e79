// Ordinary libtorch models as BlockModels: blocks, names, forward, training the original,
// and every way a parameter can be left out or claimed twice.
#include "models/wrap.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "models/block_list_model.h"
#include "models/state_dict.h"

namespace p3::models {
namespace {

std::vector<std::string> BlockNames(BlockModel& model) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < model.num_blocks(); ++i) names.push_back(model.BlockName(i));
  return names;
}

std::vector<std::string> StateNames(torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : ModuleState(module)) names.push_back(name);
  return names;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// A module with a forward() of its own, a root-level parameter and BatchNorm.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    conv1 =
        register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(4));
    fc = register_module("fc", torch::nn::Linear(4, 3));
    scale = register_parameter("scale", torch::ones({1}));
  }
  torch::Tensor features(const torch::Tensor& x) { return torch::relu(bn1(conv1(x))); }
  torch::Tensor head(const torch::Tensor& x) { return fc(x.mean({2, 3})) * scale; }
  torch::Tensor forward(const torch::Tensor& x) { return head(features(x)); }
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Linear fc{nullptr};
  torch::Tensor scale;
};
TORCH_MODULE(Net);

std::vector<FunctionBlock> NetBlocks(Net net) {
  std::shared_ptr<NetImpl> m = net.ptr();
  return {{"features", {"conv1", "bn1"}, [m](const torch::Tensor& x) { return m->features(x); }},
          {"head", {"fc", "scale"}, [m](const torch::Tensor& x) { return m->head(x); }}};
}

CATCH_TEST_CASE("a Sequential's children become its blocks, names and forward kept") {
  torch::manual_seed(1);
  torch::nn::Sequential seq(torch::nn::Linear(6, 5), torch::nn::Functional(torch::tanh),
                            torch::nn::Linear(5, 3));
  absl::StatusOr<std::shared_ptr<BlockModel>> model = WrapSequential(seq);
  CATCH_REQUIRE(model.ok());
  CATCH_CHECK(BlockNames(**model) == std::vector<std::string>{"0", "1", "2"});
  CATCH_CHECK((*model)->BlockParameters(0).size() == 2);
  CATCH_CHECK((*model)->BlockParameters(1).empty());
  CATCH_CHECK(StateNames(**model) == StateNames(*seq));
  CATCH_CHECK(CheckBlocksCoverParameters(**model).ok());
  const torch::Tensor x = torch::randn({4, 6});
  CATCH_CHECK(torch::equal((*model)->forward(x), seq->forward(x)));
  // The wrapper shares the Sequential's parameters: its forward order is theirs.
  std::vector<torch::Tensor> ordered;
  for (auto& [name, p] : (*model)->OrderedParameters()) ordered.push_back(p);
  const std::vector<torch::Tensor> own = seq->parameters();
  CATCH_REQUIRE(ordered.size() == own.size());
  for (size_t i = 0; i < own.size(); ++i) CATCH_CHECK(ordered[i].is_same(own[i]));
}

CATCH_TEST_CASE("a named Sequential's blocks are named by its names") {
  torch::nn::Sequential seq({{"hidden", torch::nn::Linear(4, 4)},
                             {"act", torch::nn::Functional(torch::relu)},
                             {"out", torch::nn::Linear(4, 2)}});
  absl::StatusOr<std::shared_ptr<BlockModel>> model = WrapSequential(seq);
  CATCH_REQUIRE(model.ok());
  CATCH_CHECK(BlockNames(**model) == std::vector<std::string>{"hidden", "act", "out"});
  CATCH_CHECK(StateNames(**model) ==
              std::vector<std::string>{"hidden.weight", "hidden.bias", "out.weight", "out.bias"});
}

CATCH_TEST_CASE("training the wrapper trains the wrapped module") {
  torch::manual_seed(2);
  torch::nn::Sequential seq(torch::nn::Linear(6, 8), torch::nn::Functional(torch::relu),
                            torch::nn::Linear(8, 3));
  absl::StatusOr<std::shared_ptr<BlockModel>> model = WrapSequential(seq);
  CATCH_REQUIRE(model.ok());
  torch::optim::SGD opt((*model)->parameters(), torch::optim::SGDOptions(0.5));
  const torch::Tensor x = torch::randn({16, 6});
  const torch::Tensor y = torch::randint(0, 3, {16});
  const float before = (*model)->Loss((*model)->forward(x), y).item<float>();
  for (int i = 0; i < 20; ++i) {
    opt.zero_grad();
    (*model)->Loss((*model)->forward(x), y).backward();
    opt.step();
  }
  CATCH_CHECK(torch::nn::functional::cross_entropy(seq->forward(x), y).item<float>() < before);
}

CATCH_TEST_CASE("a module's children in forward order become its blocks") {
  struct ChainImpl : torch::nn::Module {
    ChainImpl() {
      a = register_module("a", torch::nn::Linear(3, 4));
      b = register_module("b", torch::nn::Linear(4, 2));
    }
    torch::nn::Linear a{nullptr}, b{nullptr};
  };
  auto chain = std::make_shared<ChainImpl>();
  absl::StatusOr<std::shared_ptr<BlockModel>> model = WrapChildren(
      chain, {{"a", torch::nn::AnyModule(chain->a)}, {"b", torch::nn::AnyModule(chain->b)}});
  CATCH_REQUIRE(model.ok());
  CATCH_CHECK(BlockNames(**model) == std::vector<std::string>{"a", "b"});
  const torch::Tensor x = torch::randn({2, 3});
  CATCH_CHECK(torch::equal((*model)->forward(x), chain->b(chain->a(x))));

  // A child left out: its parameters are in no block.
  absl::StatusOr<std::shared_ptr<BlockModel>> partial =
      WrapChildren(chain, {{"a", torch::nn::AnyModule(chain->a)}});
  CATCH_CHECK(Message(partial.status()) == "parameter \"b.weight\" is in no block");
  // A name that is not a child, and a module that is not the child of its name.
  CATCH_CHECK(Message(WrapChildren(chain, {{"c", torch::nn::AnyModule(chain->a)}}).status()) ==
              "\"c\" is not a child of the module");
  CATCH_CHECK(Message(WrapChildren(chain, {{"a", torch::nn::AnyModule(torch::nn::Linear(3, 4))},
                                           {"b", torch::nn::AnyModule(chain->b)}})
                          .status()) ==
              "the module given for \"a\" is not the module's child of that name");
  // A child twice.
  CATCH_CHECK(Message(WrapChildren(chain, {{"a", torch::nn::AnyModule(chain->a)},
                                           {"a", torch::nn::AnyModule(chain->a)},
                                           {"b", torch::nn::AnyModule(chain->b)}})
                          .status()) == "two blocks are named \"a\"");
}

CATCH_TEST_CASE("functions over named children: forward, state dict and buffers are the module's") {
  torch::manual_seed(3);
  Net net;
  absl::StatusOr<std::shared_ptr<BlockModel>> model = WrapFunctions(net.ptr(), NetBlocks(net));
  CATCH_REQUIRE(model.ok());
  CATCH_CHECK(BlockNames(**model) == std::vector<std::string>{"features", "head"});
  CATCH_CHECK((*model)->BlockParameters(0).size() == 3);  // conv1.weight, bn1.weight, bn1.bias
  CATCH_CHECK((*model)->BlockParameters(1).size() == 3);  // fc.weight, fc.bias, scale
  CATCH_CHECK(StateNames(**model) == StateNames(*net));   // running_mean & co. included
  const torch::Tensor x = torch::randn({2, 1, 6, 6});
  CATCH_CHECK(torch::equal((*model)->forward(x), net->forward(x)));
  // Train mode moves the module's own BatchNorm statistics.
  CATCH_CHECK(net->bn1->num_batches_tracked.item<int64_t>() == 2);
}

CATCH_TEST_CASE(
    "a parameter in no block, in two blocks, unknown names and frozen ones are refused") {
  Net net;
  std::vector<FunctionBlock> blocks = NetBlocks(net);
  blocks[1].owns = {"fc"};  // scale forgotten
  CATCH_CHECK(Message(WrapFunctions(net.ptr(), blocks).status()) ==
              "parameter \"scale\" is in no block");

  blocks = NetBlocks(net);
  blocks[1].owns = {"fc.weight", "scale"};  // a single parameter of a child can be owned...
  CATCH_CHECK(Message(WrapFunctions(net.ptr(), blocks).status()) ==
              "parameter \"fc.bias\" is in no block");

  blocks = NetBlocks(net);
  blocks[1].owns = {"fc", "scale", "bn1"};  // ...but not twice
  CATCH_CHECK(Message(WrapFunctions(net.ptr(), blocks).status()) ==
              "parameter \"bn1.weight\" is in blocks \"features\" and \"head\"");

  blocks = NetBlocks(net);
  blocks[0].owns = {"conv1", "bn1", "conv1.weight"};
  CATCH_CHECK(Message(WrapFunctions(net.ptr(), blocks).status()) ==
              "parameter \"conv1.weight\" is in blocks \"features\" and \"features\"");

  blocks = NetBlocks(net);
  blocks[0].owns = {"conv1", "bn", "bn1"};
  CATCH_CHECK(Message(WrapFunctions(net.ptr(), blocks).status()) ==
              "block \"features\": \"bn\" is neither a submodule nor a parameter of the module");

  blocks = NetBlocks(net);
  blocks[1].fn = nullptr;
  CATCH_CHECK(Message(WrapFunctions(net.ptr(), blocks).status()) ==
              "block \"head\" has no function");
  CATCH_CHECK(Message(WrapFunctions(net.ptr(), {}).status()) == "at least one block is needed");

  net->scale.set_requires_grad(false);
  absl::Status frozen = WrapFunctions(net.ptr(), NetBlocks(net)).status();
  CATCH_CHECK(frozen.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(Message(frozen).find("parameter \"scale\" does not require grad") == 0);
}

// A hand-written BlockModel whose blocks forget a registered parameter.
class Forgetful : public BlockListModel {
 public:
  Forgetful() {
    fc_ = register_module("fc", torch::nn::Linear(2, 2));
    extra_ = register_parameter("extra", torch::zeros({3}));
    AddModuleBlock("fc", fc_.ptr());
  }

 private:
  torch::nn::Linear fc_{nullptr};
  torch::Tensor extra_;
};

CATCH_TEST_CASE("CheckBlocksCoverParameters names a parameter a hand-written model left out") {
  Forgetful model;
  CATCH_CHECK(Message(CheckBlocksCoverParameters(model)) == "parameter \"extra\" is in no block");
}

}  // namespace
}  // namespace p3::models
