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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/state_dict.h"

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

// --- State dicts with the whole layer's names ---------------------------------------------
//
// A model in pieces names the layer's parameters "output.<i>.weight" and "output.<i>.bias";
// the same model with one block, and PyTorch's module, name them "output.weight" [vocab, in]
// and "output.bias" [vocab]. The trainer writes model.pt and reads model.init_from through
// the two functions at the end, so a file is the same whatever output_pieces a run used.

// `state` with the pieces' entries "<prefix>.<i>.weight" / ".bias" (i = 0 .. K-1) joined in
// piece order into "<prefix>.weight" and "<prefix>.bias" (new tensors), in the place of the
// first piece's entries: the names, order and values of the model with one block. A state
// without "<prefix>.0.weight" is returned as it is. InvalidArgument, naming the entry, when
// the pieces are not 0 .. K-1 each with a weight and a bias of matching rows and inputs.
absl::StatusOr<StateDict> JoinOutputPieces(StateDict state,
                                           const std::string& prefix = "output");

// The inverse: "<prefix>.weight" and "<prefix>.bias" cut by rows into `pieces` pieces' entries
// as CutOutput cuts the layer (views of the given tensors), in the weight's place. pieces <= 1,
// or a state without "<prefix>.weight" (e.g. one already in pieces), is returned as it is.
// InvalidArgument when the bias is missing or its rows differ from the weight's, or the
// rows are fewer than the pieces.
absl::StatusOr<StateDict> CutOutputPieces(StateDict state, int64_t pieces,
                                          const std::string& prefix = "output");

// SaveStateDict (models/state_dict.h) of a model built with `pieces` output pieces, its
// entries joined (JoinOutputPieces): the file a model with one block would write.
absl::Status SaveJoinedStateDict(torch::nn::Module& model, int64_t pieces,
                                 const std::string& path);

// LoadStateDict into a model built with `pieces` output pieces, from a file with the whole
// layer's entries (cut by CutOutputPieces) or with the pieces' own. Errors as
// LoadStateDict's, prefixed with the path.
absl::Status LoadStateDictIntoPieces(const std::string& path, int64_t pieces,
                                     torch::nn::Module& model);

}  // namespace p3::models

#endif  // P3_MODELS_OUTPUT_PIECES_H_
