// Creates any model of the zoo by name, with deterministic initialisation.
//
// Names: "small_cnn" (models/small_cnn.h), "mlp" (models/mlp.h), "resnet50"
// (models/resnet.h), "vgg16", "vgg19" (models/vgg.h), "inception_v3" (models/inception.h),
// "seq2seq_lstm" (models/seq2seq_lstm.h), "transformer" (models/transformer.h), "row_lstm"
// (models/row_lstm.h: Fashion-MNIST images read row by row by an LSTM). The
// sequence models' token layout: models/sequence.h. Sizes, block lists and measured costs
// of every model: docs/models.md.
//
// Example:
//   p3::models::ModelOptions options;
//   options.name = "mlp";
//   options.seed = 7;
//   P3_ASSIGN_OR_RETURN(std::shared_ptr<p3::models::BlockModel> model,   // p3/base/status_macros.h
//                       p3::models::CreateModel(options));
//   torch::Tensor logits = model->forward(torch::randn({4, 12}));
#ifndef P3_MODELS_ZOO_H_
#define P3_MODELS_ZOO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"

namespace p3::models {

struct ModelOptions {
  // Default: "small_cnn". One of ModelNames().
  std::string name = "small_cnn";
  // Default: 10.
  int64_t num_classes = 10;
  // Input height and width. Default: 0, the model's own (small_cnn and row_lstm 28; mlp: no
  // image, 12 inputs). small_cnn and row_lstm are built for it (small_cnn: a multiple of
  // 4; row_lstm: rows are time steps); for "mlp", a non-zero
  // image_size makes the input image_size^2 * in_channels features. The other image models
  // pool adaptively and take any size from their minimum (resnet50, vgg16, vgg19: 32;
  // inception_v3: 75); a smaller image_size is rejected.
  int64_t image_size = 0;
  // Input channels. Default: 0, the model's own (small_cnn, row_lstm 1, the others 3; mlp: see
  // image_size). For "mlp" without image_size, in_channels > 0 is the number of inputs.
  int64_t in_channels = 0;
  // Vocabulary size of the sequence models (>= 3). Default: 0, meaning 32,000.
  int64_t vocab_size = 0;
  // Sequence length of the sequence models. They take any length, so this is only
  // recorded for data and benchmarks. Default: 0.
  int64_t seq_len = 0;
  // The sequence models' output projection in this many blocks, for the data path to
  // overlap it (models/output_pieces.h); 0 or 1: one block. Others: 0 or 1 only.
  // Default: 0.
  int64_t output_pieces = 0;
  // Seed of the parameter initialisation: same options, same parameters. Default: 1.
  uint64_t seed = 1;
};

// The names CreateModel() accepts, in the order they are documented.
std::vector<std::string> ModelNames();

// A new model with freshly initialised parameters (torch::manual_seed(options.seed) is
// called first, so this changes libtorch's global random state). InvalidArgumentError
// for an unknown name (naming the allowed ones) or sizes the model cannot take.
absl::StatusOr<std::shared_ptr<BlockModel>> CreateModel(const ModelOptions& options);

}  // namespace p3::models

#endif  // P3_MODELS_ZOO_H_
