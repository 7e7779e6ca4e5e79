// The zoo's large models: torchvision's parameter counts and names, block structure, and a
// training step at reduced input sizes; the sequence models' token flow.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "models/sequence.h"
#include "models/zoo.h"
#include "tests/models/models_test_util.h"

namespace p3::models {
namespace {

using testing::BlockNames;
using testing::CheckBlocksPartitionParameters;
using testing::CountParameters;
using testing::Create;
using testing::TrainStepThroughBlocks;

ModelOptions Options(const std::string& name, int64_t num_classes = 1000) {
  ModelOptions options;
  options.name = name;
  options.num_classes = num_classes;
  return options;
}

std::vector<std::string> ParameterNames(BlockModel& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters()) names.push_back(item.key());
  return names;
}

struct VisionCase {
  std::string name;
  int64_t parameters;  // torchvision's, 1000 classes
  int64_t num_blocks;
  int64_t reduced_size;  // a small input that keeps every parameter in use
};

CATCH_TEST_CASE("vision models have torchvision's parameter counts, names and order") {
  for (const VisionCase& c : std::vector<VisionCase>{{"resnet50", 25557032, 18, 32},
                                                     {"vgg16", 138357544, 16, 32},
                                                     {"vgg19", 143667240, 19, 32},
                                                     {"inception_v3", 27161264, 18, 75}}) {
    CATCH_INFO(c.name);
    std::shared_ptr<BlockModel> model = Create(Options(c.name));
    CATCH_CHECK(CountParameters(*model) == c.parameters);
    CATCH_CHECK(model->num_blocks() == c.num_blocks);
    CheckBlocksPartitionParameters(*model);
    // Names as torchvision's named_parameters(): weights load by name.
    std::vector<std::string> names = ParameterNames(*model);
    CATCH_CHECK(names.back() == (c.name.rfind("vgg", 0) == 0 ? "classifier.6.bias" : "fc.bias"));
  }
}

CATCH_TEST_CASE("resnet50 blocks are the stem, one per bottleneck, and fc") {
  std::shared_ptr<BlockModel> model = Create(Options("resnet50"));
  std::vector<std::string> blocks = BlockNames(*model);
  CATCH_CHECK(blocks.front() == "conv1");
  CATCH_CHECK(blocks[1] == "layer1.0");
  CATCH_CHECK(blocks[16] == "layer4.2");
  CATCH_CHECK(blocks.back() == "fc");
  std::vector<std::string> names = ParameterNames(*model);
  CATCH_CHECK(names[0] == "conv1.weight");
  CATCH_CHECK(std::find(names.begin(), names.end(), "layer1.0.downsample.0.weight") != names.end());
  CATCH_CHECK(std::find(names.begin(), names.end(), "layer1.1.downsample.0.weight") == names.end());
}

CATCH_TEST_CASE("inception_v3's AuxLogits block sits between Mixed_6e and Mixed_7a") {
  std::shared_ptr<BlockModel> model = Create(Options("inception_v3"));
  std::vector<std::string> blocks = BlockNames(*model);
  auto at = [&](const std::string& n) {
    return std::find(blocks.begin(), blocks.end(), n) - blocks.begin();
  };
  CATCH_CHECK(at("AuxLogits") == at("Mixed_6e") + 1);
  CATCH_CHECK(at("Mixed_7a") == at("AuxLogits") + 1);
  // 768*128 (conv0) + 128 * 768 * 25 (conv1) + BN + fc 768*1000+1000
  int64_t aux = 0;
  for (const torch::Tensor& p : model->BlockParameters(at("AuxLogits"))) aux += p.numel();
  CATCH_CHECK(aux == 768 * 128 + 2 * 128 + 128 * 768 * 25 + 2 * 768 + 768 * 1000 + 1000);
}

CATCH_TEST_CASE("each vision model trains one step at a reduced input size") {
  for (const auto& [name, size] : std::vector<std::pair<std::string, int64_t>>{
           {"resnet50", 32}, {"vgg16", 32}, {"vgg19", 32}, {"inception_v3", 75}}) {
    CATCH_INFO(name << " at " << size << "x" << size);
    std::shared_ptr<BlockModel> model = Create(Options(name, 10));
    torch::Tensor logits = TrainStepThroughBlocks(*model, torch::randn({2, 3, size, size}),
                                                  torch::tensor({1, 7}, torch::kInt64));
    CATCH_CHECK(logits.sizes() == torch::IntArrayRef({2, 10}));
  }
}

CATCH_TEST_CASE("inception_v3 adds the auxiliary loss in training mode only") {
  std::shared_ptr<BlockModel> model = Create(Options("inception_v3", 10));
  torch::Tensor x = torch::randn({2, 3, 75, 75});
  torch::Tensor target = torch::tensor({2, 3}, torch::kInt64);
  model->eval();
  torch::Tensor eval_logits = model->forward(x);
  torch::Tensor eval_loss = model->Loss(eval_logits, target);
  CATCH_CHECK(eval_loss.item<double>() ==
              Approx(torch::nn::functional::cross_entropy(eval_logits, target).item<double>()));
  model->train();
  torch::Tensor train_logits = model->forward(x);
  const double main_loss =
      torch::nn::functional::cross_entropy(train_logits, target).item<double>();
  const double loss = model->Loss(train_logits, target).item<double>();
  CATCH_CHECK(loss > main_loss + 0.1);  // 0.4 * an untrained 10-class cross-entropy (~2.3)
  // Loss consumed the auxiliary logits: a second call has none left.
  CATCH_CHECK(model->Loss(train_logits, target).item<double>() == Approx(main_loss));
}

CATCH_TEST_CASE("inception_v3 at its native 299x299 uses torchvision's auxiliary pool") {
  std::shared_ptr<BlockModel> model = Create(Options("inception_v3", 10));
  torch::Tensor logits = TrainStepThroughBlocks(*model, torch::randn({2, 3, 299, 299}),
                                                torch::tensor({0, 9}, torch::kInt64));
  CATCH_CHECK(logits.sizes() == torch::IntArrayRef({2, 10}));
}

CATCH_TEST_CASE("image sizes below a model's minimum are InvalidArgument") {
  ModelOptions options = Options("inception_v3");
  options.image_size = 64;
  CATCH_CHECK(CreateModel(options).status().code() == absl::StatusCode::kInvalidArgument);
  options = Options("vgg19");
  options.image_size = 16;
  CATCH_CHECK(CreateModel(options).status().code() == absl::StatusCode::kInvalidArgument);
  options = Options("transformer");
  options.vocab_size = 2;
  CATCH_CHECK(CreateModel(options).status().code() == absl::StatusCode::kInvalidArgument);
}

// Source tokens, decoder input tokens, target: [B, 2, L] and [B, L].
std::pair<torch::Tensor, torch::Tensor> Tokens(int64_t batch, int64_t length, int64_t vocab) {
  torch::Tensor source = torch::randint(2, vocab, {batch, length}, torch::kInt64);
  torch::Tensor target = torch::randint(2, vocab, {batch, length}, torch::kInt64);
  torch::Tensor decoder_input = torch::cat(
      {torch::full({batch, 1}, kBosToken, torch::kInt64), target.slice(1, 0, length - 1)}, 1);
  return {torch::stack({source, decoder_input}, 1), target};
}

struct SequenceCase {
  std::string name;
  int64_t parameters;  // at the default vocabulary of 32,000
  std::vector<std::string> blocks;
};

CATCH_TEST_CASE("sequence models: default sizes and block lists") {
  std::vector<std::string> transformer_blocks = {"embed"};
  for (int i = 0; i < 6; ++i) transformer_blocks.push_back("encoder." + std::to_string(i));
  for (int i = 0; i < 6; ++i) transformer_blocks.push_back("decoder." + std::to_string(i));
  transformer_blocks.push_back("output");
  for (const SequenceCase& c : std::vector<SequenceCase>{
           {"seq2seq_lstm",
            58114816,
            {"embed", "encoder.0", "encoder.1", "decoder.0", "decoder.1", "attention", "output"}},
           {"transformer", 76938496, transformer_blocks}}) {
    CATCH_INFO(c.name);
    std::shared_ptr<BlockModel> model = Create(Options(c.name));
    CATCH_CHECK(CountParameters(*model) == c.parameters);
    CATCH_CHECK(BlockNames(*model) == c.blocks);
    CheckBlocksPartitionParameters(*model);
  }
}

CATCH_TEST_CASE("sequence models train a step and are causal in the target") {
  for (const std::string name : {"seq2seq_lstm", "transformer"}) {
    CATCH_INFO(name);
    ModelOptions options = Options(name);
    options.vocab_size = 50;
    std::shared_ptr<BlockModel> model = Create(options);
    auto [input, target] = Tokens(3, 7, 50);
    torch::Tensor logits = TrainStepThroughBlocks(*model, input, target);
    CATCH_CHECK(logits.sizes() == torch::IntArrayRef({3, 7, 50}));

    model->eval();  // no dropout
    torch::NoGradGuard no_grad;
    torch::Tensor before = model->forward(input);
    torch::Tensor later_target_changed = input.clone();
    later_target_changed[0][1][5] = (later_target_changed[0][1][5].item<int64_t>() + 1) % 48 + 2;
    torch::Tensor after = model->forward(later_target_changed);
    // Positions before 5 cannot see decoder input 5; position 5 does.
    CATCH_CHECK(torch::allclose(before.slice(1, 0, 5), after.slice(1, 0, 5), 1e-5, 1e-5));
    CATCH_CHECK(!torch::allclose(before[0][5], after[0][5], 1e-5, 1e-5));
    // Every target position attends to the whole source.
    torch::Tensor source_changed = input.clone();
    source_changed[0][0][6] = (source_changed[0][0][6].item<int64_t>() + 1) % 48 + 2;
    torch::Tensor with_source = model->forward(source_changed);
    CATCH_CHECK(!torch::allclose(before[0][0], with_source[0][0], 1e-5, 1e-5));
    CATCH_CHECK(torch::allclose(before[1], with_source[1], 1e-5, 1e-5));
  }
}

CATCH_TEST_CASE("sequence losses ignore padded target positions") {
  for (const std::string name : {"seq2seq_lstm", "transformer"}) {
    CATCH_INFO(name);
    ModelOptions options = Options(name);
    options.vocab_size = 20;
    std::shared_ptr<BlockModel> model = Create(options);
    model->eval();
    auto [input, target] = Tokens(2, 4, 20);
    torch::NoGradGuard no_grad;
    torch::Tensor logits = model->forward(input);
    torch::Tensor padded = target.clone();
    padded.slice(1, 2, 4).fill_(kPadToken);
    torch::Tensor expected = torch::nn::functional::cross_entropy(
        logits.slice(1, 0, 2).reshape({-1, 20}), target.slice(1, 0, 2).reshape({-1}));
    CATCH_CHECK(model->Loss(logits, padded).item<double>() == Approx(expected.item<double>()));
  }
}

}  // namespace
}  // namespace p3::models
