// A row-sequential LSTM image classifier: each image is read as a sequence of its rows
// (Fashion-MNIST: 28 time steps of 28 pixels), through a stack of LSTM layers; the last
// time step's hidden state is classified. Small enough to train on a CPU, deep enough to
// cut into 4 pipeline stages (one LSTM layer each by default).
//
// Blocks, in forward order (num_layers + 1):
//   "lstm.0":    the image [B, C, H, W] read as H time steps of C*W values (row r of
//                every channel), LSTM(C*W, hidden_size): the sequence [B, H, hidden_size]
//   "lstm.1" ... "lstm.<num_layers-1>": LSTM(hidden_size, hidden_size) on the sequence
//   "fc":        the last time step's output, Linear(hidden_size, num_classes): logits
// 33,610 parameters at the defaults (hidden 32, 4 layers, 28x28x1, 10 classes).
// Parameter names follow the registered modules: "lstm0.weight_ih_l0", ..., "fc.bias".
// No dropout; libtorch's LSTM initialisation (uniform in +-1/sqrt(hidden_size)).
//
// Example:
//   torch::manual_seed(1);
//   auto model = std::make_shared<p3::models::RowLstm>(p3::models::RowLstmOptions{});
//   torch::Tensor logits = model->forward(torch::randn({8, 1, 28, 28}));  // [8, 10]
#ifndef P3_MODELS_ROW_LSTM_H_
#define P3_MODELS_ROW_LSTM_H_

#include <cstdint>

#include "models/block_list_model.h"

namespace p3::models {

struct RowLstmOptions {
  int64_t num_classes = 10;  // Default: 10.
  int64_t in_channels = 1;   // Default: 1.
  int64_t image_size = 28;   // Rows (time steps) and pixels per row. Default: 28.
  int64_t hidden_size = 32;  // Default: 32.
  int64_t num_layers = 4;    // LSTM layers, one block each. Default: 4.
};

class RowLstm : public BlockListModel {
 public:
  // Throws std::invalid_argument for sizes < 1 (the zoo turns it into a status).
  explicit RowLstm(const RowLstmOptions& options);
};

}  // namespace p3::models

#endif  // P3_MODELS_ROW_LSTM_H_
