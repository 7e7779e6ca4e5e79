#include "models/data.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/fashion_mnist.h"
#include "models/synthetic.h"

namespace p3::models {

absl::StatusOr<std::shared_ptr<Dataset>> CreateDataset(const DatasetOptions& options) {
  const int64_t size = options.size > 0 ? options.size : (options.train ? 60000 : 10000);
  const uint64_t stream = options.train ? 0 : 1;
  if (options.name == "fashion_mnist") return LoadFashionMnist(options.dir, options.train);
  if (options.name == "synthetic") {
    return SyntheticImages(size, options.channels, options.image_size, options.num_classes,
                           options.seed, stream);
  }
  if (options.name == "synthetic_tokens") {
    return SyntheticTokens(size, options.seq_len, options.vocab_size, options.seed, stream);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dataset name \"", options.name,
                   "\"; allowed: fashion_mnist, synthetic, synthetic_tokens"));
}

}  // namespace p3::models
