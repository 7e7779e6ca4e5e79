#include "models/output_pieces.h"

#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/output_rows.h"

namespace p3::models {
namespace {

// One piece's parameters, named as a Linear's.
class LinearPieceImpl : public torch::nn::Module {
 public:
  LinearPieceImpl(torch::Tensor weight, torch::Tensor bias) {
    weight_ = register_parameter("weight", std::move(weight));
    bias_ = register_parameter("bias", std::move(bias));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    return torch::nn::functional::linear(x, weight_, bias_);
  }

 private:
  torch::Tensor weight_, bias_;
};

// The piece index of "<prefix>.<i>.weight" / ".bias", with which of the two; nullopt for
// any other name.
struct PieceEntry {
  int64_t index = 0;
  bool bias = false;
};
std::optional<PieceEntry> ParsePieceName(const std::string& name, const std::string& prefix) {
  if (!absl::StartsWith(name, prefix + ".")) return std::nullopt;
  std::string rest = name.substr(prefix.size() + 1);
  PieceEntry entry;
  if (absl::EndsWith(rest, ".weight")) {
    rest.resize(rest.size() - 7);
  } else if (absl::EndsWith(rest, ".bias")) {
    rest.resize(rest.size() - 5);
    entry.bias = true;
  } else {
    return std::nullopt;
  }
  if (rest.empty() || !std::all_of(rest.begin(), rest.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(rest, &entry.index)) {
    return std::nullopt;
  }
  return entry;
}

std::string Shape(const torch::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

}  // namespace

std::vector<OutputPiece> CutOutput(const torch::nn::Linear& whole, int64_t pieces,
                                   std::function<torch::Tensor(const torch::Tensor&)> input) {
  const int64_t in = whole->options.in_features();
  const int64_t vocab = whole->options.out_features();
  if (pieces < 2 || pieces > vocab) {
    throw std::invalid_argument("the output projection's pieces must be in [2, " +
                                std::to_string(vocab) + "], got " + std::to_string(pieces));
  }
  if (!whole->options.bias()) throw std::invalid_argument("the output projection needs a bias");
  torch::NoGradGuard no_grad;
  std::vector<OutputPiece> out;
  int64_t start = 0;
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t rows = OutputPieceRows(vocab, pieces, i);
    auto piece = std::make_shared<LinearPieceImpl>(
        whole->weight.narrow(0, start, rows).clone(), whole->bias.narrow(0, start, rows).clone());
    start += rows;
    std::function<torch::Tensor(const torch::Tensor&)> fn;
    if (i == 0) {
      // The input, then this piece's logits.
      fn = [piece, input](const torch::Tensor& x) {
        torch::Tensor h = input(x);
        return torch::cat({h, piece->forward(h)}, -1);
      };
    } else {
      const bool last = i == pieces - 1;
      // Split once, so that the backward gathers one gradient of the carried tensor (a
      // narrow() per part would zero-fill a whole one per part).
      fn = [piece, in, last](const torch::Tensor& y) {
        std::vector<torch::Tensor> parts = y.split_with_sizes({in, y.size(-1) - in}, -1);
        torch::Tensor logits = piece->forward(parts[0]);
        return last ? torch::cat({parts[1], logits}, -1)
                    : torch::cat({parts[0], parts[1], logits}, -1);
      };
    }
    out.push_back({"output." + std::to_string(i), piece, std::move(fn)});
  }
  return out;
}

absl::StatusOr<StateDict> JoinOutputPieces(StateDict state, const std::string& prefix) {
  std::vector<torch::Tensor> weights, biases;
  StateDict out;
  size_t place = state.size();  // where the first piece's entry was, in `out`
  for (auto& [name, tensor] : state) {
    const std::optional<PieceEntry> piece = ParsePieceName(name, prefix);
    if (!piece) {
      out.emplace_back(std::move(name), std::move(tensor));
      continue;
    }
    if (place == state.size()) place = out.size();
    std::vector<torch::Tensor>& into = piece->bias ? biases : weights;
    if (piece->index != static_cast<int64_t>(into.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", name, "\": the output pieces' entries must come in order 0, 1, ..., each "
          "piece's weight and bias once"));
    }
    const int64_t dims = piece->bias ? 1 : 2;
    if (tensor.dim() != dims || (!piece->bias && !weights.empty() &&
                                 tensor.size(1) != weights.front().size(1))) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", name, "\": shape ", Shape(tensor), " does not join the other pieces"));
    }
    into.push_back(tensor);
  }
  if (weights.empty() && biases.empty()) return out;
  if (weights.size() != biases.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the output pieces have ", weights.size(),
                                                   " weights and ", biases.size(), " biases"));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i].size(0) != biases[i].size(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", prefix, ".", i, ".bias\": shape ", Shape(biases[i]), ", the weight's rows ",
          weights[i].size(0)));
    }
  }
  torch::NoGradGuard no_grad;
  StateDict joined = {{prefix + ".weight", torch::cat(weights, 0)},
                      {prefix + ".bias", torch::cat(biases, 0)}};
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(place), joined.begin(), joined.end());
  return out;
}

absl::StatusOr<StateDict> CutOutputPieces(StateDict state, int64_t pieces,
                                          const std::string& prefix) {
  if (pieces <= 1) return state;
  auto find = [&state](const std::string& name) {
    return std::find_if(state.begin(), state.end(),
                        [&name](const auto& entry) { return entry.first == name; });
  };
  auto weight = find(prefix + ".weight");
  if (weight == state.end()) return state;
  auto bias = find(prefix + ".bias");
  const torch::Tensor w = weight->second;
  if (bias == state.end() || w.dim() != 2 || bias->second.dim() != 1 ||
      bias->second.size(0) != w.size(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", prefix, ".weight\" ", Shape(w), " needs a \"", prefix,
        ".bias\" of as many rows to be cut into pieces"));
  }
  const int64_t rows = w.size(0);
  if (pieces > rows) {
    return absl::InvalidArgumentError(absl::StrCat("\"", prefix, ".weight\" has ", rows,
                                                   " rows, fewer than the ", pieces, " pieces"));
  }
  const torch::Tensor b = bias->second;
  StateDict cut;
  int64_t start = 0;
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t own = OutputPieceRows(rows, pieces, i);
    cut.emplace_back(absl::StrCat(prefix, ".", i, ".weight"), w.narrow(0, start, own));
    cut.emplace_back(absl::StrCat(prefix, ".", i, ".bias"), b.narrow(0, start, own));
    start += own;
  }
  StateDict out;
  for (auto& entry : state) {
    if (entry.first == prefix + ".weight") {
      out.insert(out.end(), cut.begin(), cut.end());
    } else if (entry.first != prefix + ".bias") {
      out.push_back(std::move(entry));
    }
  }
  return out;
}

absl::Status SaveJoinedStateDict(torch::nn::Module& model, int64_t pieces,
                                 const std::string& path) {
  if (pieces <= 1) return SaveStateDict(model, path);
  absl::StatusOr<StateDict> joined = JoinOutputPieces(ModuleState(model));
  if (!joined.ok()) return joined.status();
  return WriteStateDict(*joined, path);
}

absl::Status LoadStateDictIntoPieces(const std::string& path, int64_t pieces,
                                     torch::nn::Module& model) {
  if (pieces <= 1) return LoadStateDict(path, model);
  absl::StatusOr<StateDict> state = ReadStateDict(path);
  if (!state.ok()) return state.status();
  absl::StatusOr<StateDict> cut = CutOutputPieces(*std::move(state), pieces);
  absl::Status copied = cut.ok() ? CopyStateDict(*cut, model) : cut.status();
  if (!copied.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", copied.message()));
  return absl::OkStatus();
}

}  // namespace p3::models
