#include "models/zoo.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/inception.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "models/row_lstm.h"
#include "models/seq2seq_lstm.h"
#include "models/small_cnn.h"
#include "models/transformer.h"
#include "models/vgg.h"
#include "p3/base/status_macros.h"

namespace p3::models {
namespace {

using Factory = std::function<absl::StatusOr<std::shared_ptr<BlockModel>>(const ModelOptions&)>;

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

// Image classifiers with adaptive pooling take any input of at least `min_size`.
absl::Status CheckImageSize(const ModelOptions& o, int64_t min_size) {
  if (o.image_size != 0 && o.image_size < min_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.name, " needs image_size >= ", min_size, ", got ", o.image_size));
  }
  return absl::OkStatus();
}

int64_t InChannels(const ModelOptions& o) { return o.in_channels > 0 ? o.in_channels : 3; }

absl::StatusOr<std::shared_ptr<BlockModel>> MakeResNet50(const ModelOptions& o) {
  P3_RETURN_IF_ERROR(CheckImageSize(o, 32));
  ResNetOptions options;
  options.num_classes = o.num_classes;
  options.in_channels = InChannels(o);
  return std::make_shared<ResNet>(options);
}

Factory MakeVgg(int64_t depth) {
  return [depth](const ModelOptions& o) -> absl::StatusOr<std::shared_ptr<BlockModel>> {
    P3_RETURN_IF_ERROR(CheckImageSize(o, 32));
    VggOptions options;
    options.depth = depth;
    options.num_classes = o.num_classes;
    options.in_channels = InChannels(o);
    return std::make_shared<Vgg>(options);
  };
}

absl::StatusOr<std::shared_ptr<BlockModel>> MakeInceptionV3(const ModelOptions& o) {
  P3_RETURN_IF_ERROR(CheckImageSize(o, 75));
  InceptionV3Options options;
  options.num_classes = o.num_classes;
  options.in_channels = InChannels(o);
  return std::make_shared<InceptionV3>(options);
}

absl::StatusOr<std::shared_ptr<BlockModel>> MakeRowLstm(const ModelOptions& o) {
  RowLstmOptions options;
  options.num_classes = o.num_classes;
  if (o.in_channels > 0) options.in_channels = o.in_channels;
  if (o.image_size > 0) options.image_size = o.image_size;
  return std::make_shared<RowLstm>(options);
}

constexpr int64_t kDefaultVocab = 32000;

absl::Status CheckVocab(const ModelOptions& o) {
  if (o.vocab_size != 0 && o.vocab_size < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.name, " needs vocab_size >= 3 (0 and 1 are padding and BOS), got ", o.vocab_size));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<BlockModel>> MakeSeq2SeqLstm(const ModelOptions& o) {
  P3_RETURN_IF_ERROR(CheckVocab(o));
  Seq2SeqLstmOptions options;
  options.vocab_size = o.vocab_size > 0 ? o.vocab_size : kDefaultVocab;
  options.output_pieces = std::max<int64_t>(1, o.output_pieces);
  return std::make_shared<Seq2SeqLstm>(options);
}

absl::StatusOr<std::shared_ptr<BlockModel>> MakeTransformer(const ModelOptions& o) {
  P3_RETURN_IF_ERROR(CheckVocab(o));
  TransformerOptions options;
  options.vocab_size = o.vocab_size > 0 ? o.vocab_size : kDefaultVocab;
  options.output_pieces = std::max<int64_t>(1, o.output_pieces);
  return std::make_shared<Transformer>(options);
}

const std::vector<std::pair<std::string, Factory>>& Factories() {
  static const auto* factories = new std::vector<std::pair<std::string, Factory>>{
      {"small_cnn", MakeSmallCnn},
      {"mlp", MakeMlp},
      {"resnet50", MakeResNet50},
      {"vgg16", MakeVgg(16)},
      {"vgg19", MakeVgg(19)},
      {"inception_v3", MakeInceptionV3},
      {"seq2seq_lstm", MakeSeq2SeqLstm},
      {"transformer", MakeTransformer},
      {"row_lstm", MakeRowLstm},
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
  if (options.output_pieces > 1 && options.name != "seq2seq_lstm" &&
      options.name != "transformer") {
    return absl::InvalidArgumentError(absl::StrCat(
        "output_pieces applies to seq2seq_lstm and transformer only (0 or 1 for \"",
        options.name, "\"), got ", options.output_pieces));
  }
  if (options.output_pieces < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("output_pieces must be >= 0 (0: one block), got ", options.output_pieces));
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
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model name \"", options.name, "\"; allowed: ", absl::StrJoin(ModelNames(), ", ")));
}

}  // namespace p3::models
