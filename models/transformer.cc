#include "models/transformer.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "models/init.h"
#include "models/output_pieces.h"
#include "models/sequence.h"

namespace p3::models {
namespace {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

// Sinusoidal position encodings [length, d] (Vaswani et al., section 3.5), float32 on
// `device`, where the embeddings are: made there, not copied there.
torch::Tensor Positions(int64_t length, int64_t d, torch::Device device) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  torch::Tensor position = torch::arange(length, options).unsqueeze(1);
  torch::Tensor rate = torch::exp(torch::arange(0, d, 2, options) * (-std::log(10000.0) / d));
  torch::Tensor pe = torch::zeros({length, d}, options);
  pe.slice(1, 0, d, 2).copy_(torch::sin(position * rate));
  pe.slice(1, 1, d, 2).copy_(torch::cos(position * rate).slice(1, 0, d / 2));
  return pe;
}

}  // namespace

Transformer::Transformer(const TransformerOptions& options) {
  const int64_t d = options.d_model;
  auto embed = register_module("embed", nn::Embedding(options.vocab_size, d));
  auto dropout = register_module("dropout", nn::Dropout(options.dropout));
  AddBlock("embed", {embed}, [embed, dropout, d](const torch::Tensor& tokens) {
    const int64_t length = tokens.size(2);
    torch::Tensor pe = Positions(length, d, embed->weight.device());
    torch::Tensor both = torch::cat({tokens.select(1, 0), tokens.select(1, 1)}, 1);  // [B, 2L]
    torch::Tensor x = embed->forward(both) * std::sqrt(static_cast<double>(d)) +
                      torch::cat({pe, pe}, 0).unsqueeze(0);
    return dropout->forward(x);
  });

  auto encoder = register_module("encoder", nn::ModuleList());
  for (int64_t i = 0; i < options.encoder_layers; ++i) {
    auto layer = std::make_shared<nn::TransformerEncoderLayerImpl>(
        nn::TransformerEncoderLayerOptions(d, options.num_heads)
            .dim_feedforward(options.ffn_size)
            .dropout(options.dropout));
    encoder->push_back(layer);
    AddBlock(absl::StrCat("encoder.", i), {layer}, [layer](const torch::Tensor& x) {
      // libtorch's layers take [L, B, D].
      torch::Tensor out = layer->forward(SourceHalf(x).transpose(0, 1)).transpose(0, 1);
      return torch::cat({out, TargetHalf(x)}, 1);
    });
  }

  auto decoder = register_module("decoder", nn::ModuleList());
  for (int64_t i = 0; i < options.decoder_layers; ++i) {
    auto layer = std::make_shared<nn::TransformerDecoderLayerImpl>(
        nn::TransformerDecoderLayerOptions(d, options.num_heads)
            .dim_feedforward(options.ffn_size)
            .dropout(options.dropout));
    decoder->push_back(layer);
    AddBlock(absl::StrCat("decoder.", i), {layer}, [layer](const torch::Tensor& x) {
      const int64_t length = x.size(1) / 2;
      torch::Tensor causal =
          torch::full({length, length}, -std::numeric_limits<float>::infinity(), x.options())
              .triu(1);
      torch::Tensor out =
          layer->forward(TargetHalf(x).transpose(0, 1), SourceHalf(x).transpose(0, 1), causal)
              .transpose(0, 1);
      return torch::cat({SourceHalf(x), out}, 1);
    });
  }

  // In pieces, the whole layer is made (and initialised) as with one piece, unregistered,
  // then cut: the same random draws, the same initial values.
  nn::Linear output(d, options.vocab_size);
  if (options.output_pieces <= 1) {
    auto whole = register_module("output", output);
    AddBlock("output", {whole},
             [whole](const torch::Tensor& x) { return whole->forward(TargetHalf(x)); });
  }

  // As torch.nn.Transformer._reset_parameters: Xavier for every matrix of the layers.
  for (const torch::Tensor& p : encoder->parameters()) {
    if (p.dim() > 1) XavierUniform(p);
  }
  for (const torch::Tensor& p : decoder->parameters()) {
    if (p.dim() > 1) XavierUniform(p);
  }
  Normal(embed->weight, 0, 1.0 / std::sqrt(static_cast<double>(d)));
  XavierUniform(output->weight);
  Constant(output->bias, 0);
  if (options.output_pieces > 1) {
    auto pieces = register_module("output", nn::ModuleList());
    for (OutputPiece& p : CutOutput(output, options.output_pieces, TargetHalf)) {
      pieces->push_back(p.module);
      AddBlock(p.name, {p.module}, p.fn);
    }
  }
}

torch::Tensor Transformer::Loss(const torch::Tensor& output, const torch::Tensor& target) {
  return F::cross_entropy(output.reshape({-1, output.size(-1)}), target.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(kPadToken));
}

}  // namespace p3::models
