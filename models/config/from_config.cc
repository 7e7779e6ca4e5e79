#include "models/config/from_config.h"

#include <algorithm>

namespace p3::models {

ModelOptions ModelOptionsFromConfig(const config::ExperimentConfig& config) {
  const config::ModelConfig& m = config.model();
  ModelOptions options;
  options.name = m.name();
  options.num_classes = m.num_classes();
  options.image_size = m.image_size();
  options.in_channels = m.in_channels();
  options.vocab_size = m.vocab_size();
  options.seq_len = m.seq_len();
  options.output_pieces = m.output_pieces();
  options.seed = config.training().seed();
  return options;
}

DatasetOptions DatasetOptionsFromConfig(const config::ExperimentConfig& config, bool train) {
  const config::ModelConfig& m = config.model();
  DatasetOptions options;
  options.name = config.data().dataset();
  options.dir = config.data().path();
  options.size = config.data().synthetic_size();
  options.num_classes = m.num_classes();
  if (m.image_size() > 0) options.image_size = m.image_size();
  if (m.in_channels() > 0) options.channels = m.in_channels();
  if (m.seq_len() > 0) options.seq_len = m.seq_len();
  if (m.vocab_size() > 0) options.vocab_size = m.vocab_size();
  options.seed = config.training().seed();
  options.train = train;
  if (!train && options.size > 0)
    options.size = std::max<int64_t>(1, options.size / kTestSetDivisor);
  return options;
}

}  // namespace p3::models
