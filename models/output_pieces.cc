#include "models/output_pieces.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <utility>

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

}  // namespace p3::models
