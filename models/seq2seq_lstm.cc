#include "models/seq2seq_lstm.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "models/output_pieces.h"
#include "models/sequence.h"

namespace p3::models {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

// Bahdanau-style MLP attention followed by Luong's attentional hidden layer.
class AttentionImpl : public nn::Module {
 public:
  explicit AttentionImpl(int64_t hidden) {
    query_ = register_module("query", nn::Linear(nn::LinearOptions(hidden, hidden).bias(false)));
    key_ = register_module("key", nn::Linear(hidden, hidden));
    score_ = register_module("score", nn::Linear(nn::LinearOptions(hidden, 1).bias(false)));
    combine_ = register_module("combine", nn::Linear(2 * hidden, hidden));
  }

  // x: [B, 2L, H] (encoder states, decoder states) -> [B, L, H].
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor encoder = SourceHalf(x);  // [B, S, H]
    torch::Tensor decoder = TargetHalf(x);  // [B, T, H]
    // [B, T, 1, H] + [B, 1, S, H] -> scores [B, T, S]
    torch::Tensor hidden = torch::tanh(query_(decoder).unsqueeze(2) + key_(encoder).unsqueeze(1));
    torch::Tensor weights = torch::softmax(score_(hidden).squeeze(-1), /*dim=*/-1);
    torch::Tensor context = torch::bmm(weights, encoder);  // [B, T, H]
    return torch::tanh(combine_(torch::cat({decoder, context}, -1)));
  }

 private:
  nn::Linear query_{nullptr}, key_{nullptr}, score_{nullptr}, combine_{nullptr};
};
TORCH_MODULE(Attention);

nn::LSTM Lstm(int64_t in, int64_t hidden, bool bidirectional) {
  return nn::LSTM(nn::LSTMOptions(in, hidden).batch_first(true).bidirectional(bidirectional));
}

// Runs `lstm` over one half of x and puts the result in its place.
torch::Tensor RunOnHalf(nn::LSTM& lstm, const torch::Tensor& x, bool source) {
  torch::Tensor half = source ? SourceHalf(x) : TargetHalf(x);
  torch::Tensor out = std::get<0>(lstm->forward(half));
  return source ? torch::cat({out, TargetHalf(x)}, 1) : torch::cat({SourceHalf(x), out}, 1);
}

}  // namespace

Seq2SeqLstm::Seq2SeqLstm(const Seq2SeqLstmOptions& options) {
  const int64_t v = options.vocab_size;
  const int64_t h = options.hidden_size;
  auto source_embed = register_module("source_embed", nn::Embedding(v, h));
  auto target_embed = register_module("target_embed", nn::Embedding(v, h));
  nn::LSTM enc0 = register_module("encoder0", Lstm(h, h / 2, /*bidirectional=*/true));
  nn::LSTM enc1 = register_module("encoder1", Lstm(h, h, false));
  nn::LSTM dec0 = register_module("decoder0", Lstm(h, h, false));
  nn::LSTM dec1 = register_module("decoder1", Lstm(h, h, false));
  auto attention = register_module("attention", Attention(h));
  nn::Linear output(h, v);  // in pieces: made as with one, unregistered, then cut

  AddBlock("embed", {source_embed, target_embed},
           [source_embed, target_embed](const torch::Tensor& tokens) {
             return torch::cat({source_embed->forward(tokens.select(1, 0)),
                                target_embed->forward(tokens.select(1, 1))},
                               1);
           });
  AddBlock("encoder.0", {enc0.ptr()},
           [enc0](const torch::Tensor& x) mutable { return RunOnHalf(enc0, x, true); });
  AddBlock("encoder.1", {enc1.ptr()},
           [enc1](const torch::Tensor& x) mutable { return RunOnHalf(enc1, x, true); });
  AddBlock("decoder.0", {dec0.ptr()},
           [dec0](const torch::Tensor& x) mutable { return RunOnHalf(dec0, x, false); });
  AddBlock("decoder.1", {dec1.ptr()},
           [dec1](const torch::Tensor& x) mutable { return RunOnHalf(dec1, x, false); });
  AddModuleBlock("attention", attention);
  if (options.output_pieces <= 1) {
    AddModuleBlock("output", register_module("output", output));
  } else {
    auto pieces = register_module("output", nn::ModuleList());
    for (OutputPiece& p : CutOutput(output, options.output_pieces,
                                    [](const torch::Tensor& x) { return x; })) {
      pieces->push_back(p.module);
      AddBlock(p.name, {p.module}, p.fn);
    }
  }
}

torch::Tensor Seq2SeqLstm::Loss(const torch::Tensor& output, const torch::Tensor& target) {
  return F::cross_entropy(output.reshape({-1, output.size(-1)}), target.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(kPadToken));
}

}  // namespace p3::models
