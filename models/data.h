// Creates a data set by name: the one place experiment configs turn into data.
//
// Names: "fashion_mnist" (models/fashion_mnist.h), "synthetic" (labelled images,
// SyntheticImages in models/synthetic.h), "synthetic_tokens" (sequence pairs for the
// sequence models, SyntheticTokens).
//
// Example:
//   p3::models::DatasetOptions options;
//   options.name = "synthetic";
//   options.size = 2048;
//   auto train = p3::models::CreateDataset(options);
//   options.train = false;
//   auto test = p3::models::CreateDataset(options);  // same classes, other samples
#ifndef P3_MODELS_DATA_H_
#define P3_MODELS_DATA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/dataset.h"

namespace p3::models {

struct DatasetOptions {
  // Default: "fashion_mnist". One of "fashion_mnist", "synthetic", "synthetic_tokens".
  std::string name = "fashion_mnist";
  // Training split when true, test split when false. Default: true.
  bool train = true;
  // Folder of the Fashion-MNIST files. Default: kFashionMnistDir.
  std::string dir = "/usr/share/datasets/fashion-mnist";
  // Synthetic only: number of samples. Default: 0, meaning 60000 (train) / 10000 (test).
  int64_t size = 0;
  // "synthetic" only. Defaults: 1 channel, 28x28, 10 classes (Fashion-MNIST's shape).
  int64_t channels = 1;
  int64_t image_size = 28;
  int64_t num_classes = 10;
  // "synthetic_tokens" only. Defaults: 16 tokens, vocabulary of 1000.
  int64_t seq_len = 16;
  int64_t vocab_size = 1000;
  // Synthetic only: same seed, same data; train and test share the classes. Default: 1.
  uint64_t seed = 1;
};

// InvalidArgumentError for an unknown name (naming the allowed ones) or bad sizes; the
// loaders' errors otherwise (NotFoundError, DataLossError for Fashion-MNIST's files).
absl::StatusOr<std::shared_ptr<Dataset>> CreateDataset(const DatasetOptions& options);

}  // namespace p3::models

#endif  // P3_MODELS_DATA_H_
