// The Transformer of "Attention Is All You Need", base size by default: post-layer-norm
// encoder and decoder layers (libtorch's TransformerEncoderLayer / TransformerDecoderLayer,
// ReLU, dropout 0.1), sinusoidal positions, one embedding shared by source and target.
// Tokens flow between blocks as models/sequence.h describes.
//
// Blocks, in forward order (1 + encoder_layers + decoder_layers + output_pieces):
//   "embed":                    shared embedding * sqrt(d_model) + positions, both halves
//   "encoder.0" .. "encoder.5": self-attention + feed-forward on the source half
//   "decoder.0" .. "decoder.5": causal self-attention + attention over the encoder's
//                               output + feed-forward on the target half
//   "output":                   Linear(d_model, vocab_size): logits [B, L, vocab_size];
//                               with output_pieces > 1, "output.0" .. instead, its rows
//                               in that many blocks (models/output_pieces.h)
// 76,938,496 parameters at the defaults (vocab 32,000). Unlike the paper, the output
// layer is not tied to the embedding (every parameter belongs to exactly one block);
// there are no padding masks. Initialisation as torch.nn.Transformer's (Xavier uniform for
// every matrix of the layers), embedding normal(0, d_model^-1/2), output Xavier + zero bias.
//
// Example:
//   torch::manual_seed(1);
//   p3::models::TransformerOptions options;
//   options.vocab_size = 1000;
//   auto model = std::make_shared<p3::models::Transformer>(options);
//   torch::Tensor logits = model->forward(torch::randint(2, 1000, {4, 2, 12}));  // [4,12,1000]
#ifndef P3_MODELS_TRANSFORMER_H_
#define P3_MODELS_TRANSFORMER_H_

#include <cstdint>

#include "models/block_list_model.h"

namespace p3::models {

struct TransformerOptions {
  int64_t vocab_size = 32000;  // Default: 32,000.
  int64_t d_model = 512;       // Default: 512 (base).
  int64_t num_heads = 8;       // Default: 8.
  int64_t ffn_size = 2048;     // Default: 2048.
  int64_t encoder_layers = 6;  // Default: 6.
  int64_t decoder_layers = 6;  // Default: 6.
  double dropout = 0.1;        // Default: 0.1.
  // The output projection in this many blocks "output.0" .. (models/output_pieces.h);
  // 1: one block "output". Default: 1.
  int64_t output_pieces = 1;
};

class Transformer : public BlockListModel {
 public:
  explicit Transformer(const TransformerOptions& options);

  // Mean cross-entropy of logits [B, L, V] against target [B, L], ignoring kPadToken.
  torch::Tensor Loss(const torch::Tensor& output, const torch::Tensor& target) override;
};

}  // namespace p3::models

#endif  // P3_MODELS_TRANSFORMER_H_
