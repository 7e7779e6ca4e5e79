// How the sequence models (models/seq2seq_lstm.h, models/transformer.h) pass tokens through
// the single-tensor block interface of models/model.h.
//
// Model input, for block 0: int64 [B, 2, L]. Row 0 holds the source tokens, row 1 the
// decoder's input tokens (kBosToken followed by the target shifted right by one). Source
// and target have the same length L; pad the shorter one with kPadToken.
// Loss target: int64 [B, L], the next target token at each position; positions holding
// kPadToken do not count.
//
// Between blocks: float [B, 2L, D]. Positions [0, L) carry the source side (embeddings,
// then encoder states), positions [L, 2L) the target side (embeddings, then decoder
// states). Block 0 embeds both halves; encoder blocks rewrite only the first half,
// decoder blocks only the second (reading the first as the encoder's output). The last
// block returns logits [B, L, vocab].
//
// Example (see also SyntheticTokens in models/synthetic.h):
//   torch::Tensor source = ..., target = ...;                   // int64 [B, L] each
//   torch::Tensor decoder_input = torch::cat(
//       {torch::full({B, 1}, p3::models::kBosToken, torch::kInt64),
//        target.slice(1, 0, L - 1)}, 1);
//   torch::Tensor input = torch::stack({source, decoder_input}, 1);  // [B, 2, L]
//   torch::Tensor loss = model->Loss(model->forward(input), target);
#ifndef P3_MODELS_SEQUENCE_H_
#define P3_MODELS_SEQUENCE_H_

#include <torch/types.h>

#include <cstdint>

namespace p3::models {

// Token ids with a fixed meaning in the sequence models and SyntheticTokens().
inline constexpr int64_t kPadToken = 0;
inline constexpr int64_t kBosToken = 1;

// The source half [B, L, D] of a between-blocks tensor [B, 2L, D].
inline torch::Tensor SourceHalf(const torch::Tensor& x) { return x.narrow(1, 0, x.size(1) / 2); }

// The target half [B, L, D] of a between-blocks tensor [B, 2L, D].
inline torch::Tensor TargetHalf(const torch::Tensor& x) {
  return x.narrow(1, x.size(1) / 2, x.size(1) / 2);
}

}  // namespace p3::models

#endif  // P3_MODELS_SEQUENCE_H_
