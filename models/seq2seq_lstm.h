// A Sockeye-shaped recurrent sequence-to-sequence model: embeddings, a 2-layer LSTM encoder
// (bidirectional first layer), a 2-layer LSTM decoder, MLP attention and an output layer.
// Tokens flow between blocks as models/sequence.h describes.
//
// Blocks, in forward order (7, or 6 + output_pieces):
//   "embed":     source and target embeddings, vocab_size x hidden_size each
//   "encoder.0": bidirectional LSTM, hidden_size/2 per direction, on the source half
//   "encoder.1": LSTM(hidden_size) on the source half
//   "decoder.0": LSTM(hidden_size) on the target half (initial state zero)
//   "decoder.1": LSTM(hidden_size) on the target half
//   "attention": MLP attention of each decoder state over the encoder states
//                (score v' tanh(W_q h + W_k s)), then tanh(W_c [h; context]); returns
//                [B, L, hidden_size]
//   "output":    Linear(hidden_size, vocab_size): logits [B, L, vocab_size]; with
//                output_pieces > 1, "output.0" .. instead, its rows in that many blocks
//                (models/output_pieces.h)
// 58,114,816 parameters at the defaults (vocab 32,000, hidden 512). Differences from
// Sockeye's RNN decoder: no input feeding (so each decoder layer runs over the whole
// sequence at once, the decoder starts from a zero state) and no dropout.
//
// Example:
//   torch::manual_seed(1);
//   p3::models::Seq2SeqLstmOptions options;
//   options.vocab_size = 1000;
//   auto model = std::make_shared<p3::models::Seq2SeqLstm>(options);
//   torch::Tensor logits = model->forward(torch::randint(2, 1000, {4, 2, 12}));  // [4,12,1000]
#ifndef P3_MODELS_SEQ2SEQ_LSTM_H_
#define P3_MODELS_SEQ2SEQ_LSTM_H_

#include <cstdint>

#include "models/block_list_model.h"

namespace p3::models {

struct Seq2SeqLstmOptions {
  int64_t vocab_size = 32000;  // Shared by source and target. Default: 32,000.
  int64_t hidden_size = 512;   // Also the embedding size; even. Default: 512.
  // The output projection in this many blocks "output.0" .. (models/output_pieces.h);
  // 1: one block "output". Default: 1.
  int64_t output_pieces = 1;
};

class Seq2SeqLstm : public BlockListModel {
 public:
  explicit Seq2SeqLstm(const Seq2SeqLstmOptions& options);

  // Mean cross-entropy of logits [B, L, V] against target [B, L], ignoring kPadToken.
  torch::Tensor Loss(const torch::Tensor& output, const torch::Tensor& target) override;
};

}  // namespace p3::models

#endif  // P3_MODELS_SEQ2SEQ_LSTM_H_
