// A sequence model's output projection cut by vocabulary rows into several blocks
// ("output.0" .. "output.<n-1>"), so that the data path can start each piece's forward as
// soon as that piece's values have arrived, and send each piece's gradient as soon as its
// backward has run, instead of waiting for one large block at the turn of the iteration
// (docs/models.md, "The output projection in pieces").
//
// The pieces are the rows of one Linear(in, vocab) in order: piece i owns rows
// [start_i, start_i + rows_i), the first vocab % n pieces one row more than the rest. Their
// initial values are the whole layer's, so a model built with n pieces starts from the
// same parameters as with one, and computes the same function and gradients up to float
// rounding (the input's gradient, for one, is summed piece by piece).
//
// Between the pieces a block passes [.., in + rows so far]: the piece's input followed by
// the logits computed so far; the last piece returns the logits [.., vocab]. The
// concatenations cost one copy of the logits so far per piece, forward and backward.
//
// Example (in a BlockListModel's constructor, after the layer's own initialisation):
//   torch::nn::Linear whole(hidden, vocab);       // unregistered: its pieces are
//   auto pieces = register_module("output", torch::nn::ModuleList());
//   for (OutputPiece& p : CutOutput(whole, 4, [](const torch::Tensor& x) { return x; })) {
//     pieces->push_back(p.module);
//     AddBlock(p.name, {p.module}, p.fn);
//   }
#ifndef P3_MODELS_OUTPUT_PIECES_H_
#define P3_MODELS_OUTPUT_PIECES_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace p3::models {

struct OutputPiece {
  std::string name;                           // "output.<i>"
  std::shared_ptr<torch::nn::Module> module;  // parameters "weight" [rows, in], "bias" [rows]
  std::function<torch::Tensor(const torch::Tensor&)> fn;  // the block's forward
};

// `pieces` (>= 2, <= the layer's out_features) blocks made of copies of `whole`'s rows.
// `input` maps the block before's output to the projection's input (e.g. TargetHalf); the
// first piece applies it. Throws std::invalid_argument for a count out of range.
std::vector<OutputPiece> CutOutput(const torch::nn::Linear& whole, int64_t pieces,
                                   std::function<torch::Tensor(const torch::Tensor&)> input);

}  // namespace p3::models

#endif  // P3_MODELS_OUTPUT_PIECES_H_
