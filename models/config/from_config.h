// What an experiment config (proto/config.proto) asks of the model zoo and the data
// sets: the one translation that the worker's trainer and the pipeline runner share.
//
// Example:
//   P3_ASSIGN_OR_RETURN(auto model, CreateModel(ModelOptionsFromConfig(config)));
//   P3_ASSIGN_OR_RETURN(auto train, CreateDataset(DatasetOptionsFromConfig(config, true)));
//
// Stateless and thread-safe. `config` must have its defaults filled (proto/config.h).
#ifndef P3_MODELS_CONFIG_FROM_CONFIG_H_
#define P3_MODELS_CONFIG_FROM_CONFIG_H_

#include <cstdint>

#include "models/data.h"
#include "models/zoo.h"
#include "proto/config.pb.h"

namespace p3::models {

// A synthetic test set has this fraction of data.synthetic_size samples (at least one):
// Fashion-MNIST's own proportion, 10,000 test images to 60,000 training images.
inline constexpr int64_t kTestSetDivisor = 6;

// model.* plus training.seed.
ModelOptions ModelOptionsFromConfig(const config::ExperimentConfig& config);

// data.*, the model's shape (image size, channels, sequence length, vocabulary) where
// the config sets it, and training.seed; the training split when `train`, else the test
// split (synthetic: data.synthetic_size / kTestSetDivisor samples).
DatasetOptions DatasetOptionsFromConfig(const config::ExperimentConfig& config, bool train);

}  // namespace p3::models

#endif  // P3_MODELS_CONFIG_FROM_CONFIG_H_
