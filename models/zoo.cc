#include "models/zoo.h"

#include <exception>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/mlp.h"
#include "models/small_cnn.h"

namespace p3::models {
namespace {

using Factory =
    std::function<absl::StatusOr<std::shared_ptr<BlockModel>>(const ModelOptions&)>;

absl::StatusOr<std::shared_ptr<BlockModel>> MakeSmallCnn(const ModelOptions& o) {
  SmallCnnOptions options;
  options.num_classes = o.num_classes;
  if (o.in_channels > 0) options.in_channels = o.in_channels;
  if (o.image_size > 0) options.image_size = o.image_size;
  if (options.image_size % 4 != 0 || options.image_size < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "small_cnn needs image_size a positive multiple of 4, got ", options.image_size));
  }
  return std::make_shared<SmallCnn>(options);
}

absl::StatusOr<std::shared_ptr<BlockModel>> MakeMlp(const ModelOptions& o) {
  MlpOptions options;
  options.num_classes = o.num_classes;
  if (o.image_size > 0) {
    options.in_features = o.image_size * o.image_size * std::max<int64_t>(o.in_channels, 1);
  } else if (o.in_channels > 0) {
    options.in_features = o.in_channels;
  }
  return std::make_shared<Mlp>(options);
}

const std::vector<std::pair<std::string, Factory>>& Factories() {
  static const auto* factories = new std::vector<std::pair<std::string, Factory>>{
      {"small_cnn", MakeSmallCnn},
      {"mlp", MakeMlp},
  };
  return *factories;
}

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Factories()) names.push_back(name);
  return names;
}

absl::StatusOr<std::shared_ptr<BlockModel>> CreateModel(const ModelOptions& options) {
  if (options.num_classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_classes must be >= 1, got ", options.num_classes));
  }
  if (options.image_size < 0 || options.in_channels < 0 || options.vocab_size < 0 ||
      options.seq_len < 0) {
    return absl::InvalidArgumentError(
        "image_size, in_channels, vocab_size and seq_len must be >= 0 (0: model default)");
  }
  for (const auto& [name, factory] : Factories()) {
    if (name != options.name) continue;
    torch::manual_seed(options.seed);
    try {
      return factory(options);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot create model \"", name, "\": ", e.what()));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown model name \"", options.name,
                                                 "\"; allowed: ",
                                                 absl::StrJoin(ModelNames(), ", ")));
}

}  // namespace p3::models
