#include "models/row_lstm.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"

namespace p3::models {
namespace {

namespace nn = torch::nn;

// [B, C, H, W] -> [B, H, C*W]: time step r holds row r of every channel.
torch::Tensor RowsAsSequence(const torch::Tensor& images) {
  return images.permute({0, 2, 1, 3}).reshape({images.size(0), images.size(2), -1});
}

}  // namespace

RowLstm::RowLstm(const RowLstmOptions& o) {
  if (o.num_classes < 1 || o.in_channels < 1 || o.image_size < 1 || o.hidden_size < 1 ||
      o.num_layers < 1) {
    throw std::invalid_argument(
        "row_lstm needs num_classes, in_channels, image_size, hidden_size and num_layers >= 1");
  }
  for (int64_t l = 0; l < o.num_layers; ++l) {
    const int64_t in = l == 0 ? o.in_channels * o.image_size : o.hidden_size;
    nn::LSTM lstm = register_module(absl::StrCat("lstm", l),
                                    nn::LSTM(nn::LSTMOptions(in, o.hidden_size).batch_first(true)));
    AddBlock(absl::StrCat("lstm.", l), {lstm.ptr()}, [lstm, l](const torch::Tensor& x) mutable {
      return std::get<0>(lstm->forward(l == 0 ? RowsAsSequence(x) : x));
    });
  }
  nn::Linear fc = register_module("fc", nn::Linear(o.hidden_size, o.num_classes));
  AddBlock("fc", {fc.ptr()}, [fc](const torch::Tensor& x) mutable {
    return fc->forward(x.select(/*dim=*/1, x.size(1) - 1));
  });
}

}  // namespace p3::models
