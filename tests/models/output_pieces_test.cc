// The sequence models with their output projection in pieces (models/output_pieces.h):
// the same parameters, function and gradients as with one block, and the refusals.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "models/output_pieces.h"
#include "models/sequence.h"
#include "models/state_dict.h"
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

void CheckSameState(const StateDict& got, const StateDict& want) {
  CATCH_REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CATCH_INFO(want[i].first);
    CATCH_CHECK(got[i].first == want[i].first);
    CATCH_CHECK(torch::equal(got[i].second, want[i].second));
  }
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

CATCH_TEST_CASE("output pieces: model.pt and init_from carry the whole layer's names") {
  for (const std::string name : {"seq2seq_lstm", "transformer"}) {
    CATCH_INFO(name);
    std::shared_ptr<BlockModel> whole = Create(Options(name, 0));
    std::shared_ptr<BlockModel> cut = Create(Options(name, 3));
    // Joined, the pieces' state is the whole model's: names, order and values.
    absl::StatusOr<StateDict> joined = JoinOutputPieces(ModuleState(*cut));
    CATCH_REQUIRE(joined.ok());
    CheckSameState(*joined, ModuleState(*whole));

    // A whole layer's file (as PyTorch's module writes it) loads into the pieces.
    {
      torch::NoGradGuard no_grad;
      for (auto& p : whole->parameters()) p.add_(torch::randn(p.sizes()));
    }
    const std::string whole_file = TempPath(name + "_whole.pt");
    CATCH_REQUIRE(SaveStateDict(*whole, whole_file).ok());
    absl::Status loaded = LoadStateDictIntoPieces(whole_file, 3, *cut);
    CATCH_REQUIRE(loaded.ok());
    CheckSameState(*JoinOutputPieces(ModuleState(*cut)), ModuleState(*whole));
    CATCH_CHECK(cut->BlockParameters(cut->num_blocks() - 1)[0].size(0) == 16);

    // What the pieces save is what the whole model saves.
    const std::string cut_file = TempPath(name + "_cut.pt");
    CATCH_REQUIRE(SaveJoinedStateDict(*cut, 3, cut_file).ok());
    CheckSameState(*ReadStateDict(cut_file), *ReadStateDict(whole_file));

    // A file in the pieces' own names (an earlier model.pt) still loads.
    std::shared_ptr<BlockModel> again = Create(Options(name, 3));
    const std::string pieces_file = TempPath(name + "_pieces.pt");
    CATCH_REQUIRE(SaveStateDict(*cut, pieces_file).ok());
    CATCH_REQUIRE(LoadStateDictIntoPieces(pieces_file, 3, *again).ok());
    CheckSameState(ModuleState(*again), ModuleState(*cut));
  }
}

CATCH_TEST_CASE("output pieces: state dicts that do not fit are refused, naming the entry") {
  std::shared_ptr<BlockModel> cut = Create(Options("seq2seq_lstm", 3));
  StateDict state = ModuleState(*cut);
  StateDict missing;
  for (const auto& entry : state) {
    if (entry.first != "output.1.weight") missing.push_back(entry);
  }
  absl::StatusOr<StateDict> joined = JoinOutputPieces(missing);
  CATCH_CHECK(joined.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(joined.status().message()).find("output.2.weight") != std::string::npos);

  StateDict whole = *JoinOutputPieces(state);
  absl::StatusOr<StateDict> too_many = CutOutputPieces(whole, kVocab + 1);
  CATCH_CHECK(too_many.status().code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(too_many.status().message()).find("fewer than") != std::string::npos);
  StateDict no_bias;
  for (const auto& entry : whole) {
    if (entry.first != "output.bias") no_bias.push_back(entry);
  }
  CATCH_CHECK(CutOutputPieces(no_bias, 3).status().code() == absl::StatusCode::kInvalidArgument);

  // Another vocabulary: the shape mismatch is named, with the file.
  ModelOptions other = Options("seq2seq_lstm", 0);
  other.vocab_size = kVocab + 10;
  const std::string file = TempPath("other_vocab.pt");
  CATCH_REQUIRE(SaveStateDict(*Create(other), file).ok());
  absl::Status loaded = LoadStateDictIntoPieces(file, 3, *cut);
  CATCH_CHECK(loaded.code() == absl::StatusCode::kInvalidArgument);
  CATCH_CHECK(std::string(loaded.message()).find(file) != std::string::npos);
}

}  // namespace
}  // namespace p3::models
