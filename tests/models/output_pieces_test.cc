// The sequence models with their output projection in pieces (models/output_pieces.h):
// the same parameters, function and gradients as with one block, and the refusals.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "models/sequence.h"
#include "models/zoo.h"
#include "tests/models/models_test_util.h"

namespace p3::models {
namespace {

using testing::BlockNames;
using testing::CheckBlocksPartitionParameters;
using testing::Create;

constexpr int64_t kVocab = 50;

ModelOptions Options(const std::string& name, int64_t pieces) {
  ModelOptions options;
  options.name = name;
  options.vocab_size = kVocab;
  options.output_pieces = pieces;
  return options;
}

// The parameters by name, each piece's "output.<i>.weight"/".bias" joined into the whole
// layer's "output.weight"/".bias" in piece order.
std::vector<std::pair<std::string, torch::Tensor>> Joined(
    BlockModel& model, const std::function<torch::Tensor(const torch::Tensor&)>& of) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::vector<torch::Tensor> weights, biases;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    if (name.rfind("output.", 0) == 0 && name != "output.weight" && name != "output.bias") {
      (name.substr(name.size() - 5) == ".bias" ? biases : weights).push_back(of(item.value()));
    } else {
      out.emplace_back(name, of(item.value()));
    }
  }
  if (!weights.empty()) {
    out.emplace_back("output.weight", torch::cat(weights, 0));
    out.emplace_back("output.bias", torch::cat(biases, 0));
  }
  return out;
}

std::pair<torch::Tensor, torch::Tensor> Tokens(int64_t batch, int64_t length) {
  torch::manual_seed(7);
  torch::Tensor source = torch::randint(2, kVocab, {batch, length}, torch::kInt64);
  torch::Tensor target = torch::randint(2, kVocab, {batch, length}, torch::kInt64);
  torch::Tensor decoder_input = torch::cat(
      {torch::full({batch, 1}, kBosToken, torch::kInt64), target.slice(1, 0, length - 1)}, 1);
  return {torch::stack({source, decoder_input}, 1), target};
}

// Runs the model block by block (as the workers do), then backward; the logits.
torch::Tensor ForwardBackward(BlockModel& model, const torch::Tensor& input,
                              const torch::Tensor& target) {
  model.zero_grad();
  torch::Tensor x = input;
  for (int64_t i = 0; i < model.num_blocks(); ++i) x = model.ForwardBlock(i, x);
  model.Loss(x, target).backward();
  return x.detach();
}

CATCH_TEST_CASE("output pieces: same initial parameters, logits and gradients as one block") {
  for (const std::string name : {"seq2seq_lstm", "transformer"}) {
    CATCH_INFO(name);
    std::shared_ptr<BlockModel> whole = Create(Options(name, 0));
    const torch::Tensor draw_after_whole = torch::rand({4});
    std::shared_ptr<BlockModel> cut = Create(Options(name, 3));
    // The pieces cost no random draws: what the global generator gives next (dropout,
    // data) is the same.
    CATCH_CHECK(torch::equal(torch::rand({4}), draw_after_whole));

    std::vector<std::string> blocks = BlockNames(*whole);
    blocks.pop_back();
    for (const char* piece : {"output.0", "output.1", "output.2"}) blocks.push_back(piece);
    CATCH_CHECK(BlockNames(*cut) == blocks);
    CheckBlocksPartitionParameters(*cut);
    // 50 rows: 17, 17, 16.
    CATCH_CHECK(cut->BlockParameters(cut->num_blocks() - 1)[0].size(0) == 16);
    CATCH_CHECK(cut->BlockParameters(cut->num_blocks() - 3)[0].size(0) == 17);

    auto same = [](const torch::Tensor& t) { return t; };
    auto values_whole = Joined(*whole, same);
    auto values_cut = Joined(*cut, same);
    CATCH_REQUIRE(values_whole.size() == values_cut.size());
    for (size_t i = 0; i < values_whole.size(); ++i) {
      CATCH_INFO(values_whole[i].first);
      CATCH_CHECK(values_cut[i].first == values_whole[i].first);
      CATCH_CHECK(torch::equal(values_cut[i].second, values_whole[i].second));
    }

    whole->eval();  // no dropout
    cut->eval();
    auto [input, target] = Tokens(3, 6);
    torch::Tensor logits_whole = ForwardBackward(*whole, input, target);
    torch::Tensor logits_cut = ForwardBackward(*cut, input, target);
    CATCH_CHECK(logits_cut.sizes() == logits_whole.sizes());
    CATCH_CHECK(torch::allclose(logits_cut, logits_whole, 1e-5, 1e-6));
    auto grad = [](const torch::Tensor& t) { return t.grad(); };
    auto grads_whole = Joined(*whole, grad);
    auto grads_cut = Joined(*cut, grad);
    for (size_t i = 0; i < grads_whole.size(); ++i) {
      CATCH_INFO(grads_whole[i].first);
      CATCH_REQUIRE(grads_cut[i].second.defined());
      CATCH_CHECK(torch::allclose(grads_cut[i].second, grads_whole[i].second, 1e-4, 1e-6));
    }
  }
}

CATCH_TEST_CASE("output pieces: 1 is one block; other models and counts are refused") {
  CATCH_CHECK(BlockNames(*Create(Options("transformer", 1))).back() == "output");
  CATCH_CHECK(Create(Options("seq2seq_lstm", kVocab))->num_blocks() == 6 + kVocab);
  for (auto [name, pieces] : std::vector<std::pair<std::string, int64_t>>{
           {"transformer", kVocab + 1}, {"seq2seq_lstm", -1}, {"small_cnn", 2}}) {
    CATCH_INFO(name << " " << pieces);
    absl::StatusOr<std::shared_ptr<BlockModel>> model = CreateModel(Options(name, pieces));
    CATCH_CHECK(model.status().code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(std::string(model.status().message()).find("pieces") != std::string::npos);
  }
}

}  // namespace
}  // namespace p3::models
