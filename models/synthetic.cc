#include "models/synthetic.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/tensor_dataset.h"

namespace p3::models {
namespace {

// Distinct generators for the class structure and for each sample stream.
at::Generator MakeGenerator(uint64_t seed, uint64_t stream) {
  // splitmix64 of (seed, stream): nearby seeds give unrelated generators.
  uint64_t z = seed * 0x9E3779B97F4A7C15ULL + stream + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return at::detail::createCPUGenerator(z ^ (z >> 31));
}

// Stream number reserved for the class structure; sample streams are offset past it.
constexpr uint64_t kStructureStream = 0;

}  // namespace

absl::StatusOr<std::shared_ptr<Dataset>> SyntheticImages(int64_t size, int64_t channels,
                                                         int64_t image_size, int64_t num_classes,
                                                         uint64_t seed, uint64_t stream) {
  if (size < 1 || channels < 1 || image_size < 1 || num_classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SyntheticImages needs size, channels, image_size and num_classes >= 1, got ",
                     size, ", ", channels, ", ", image_size, ", ", num_classes));
  }
  at::Generator structure = MakeGenerator(seed, kStructureStream);
  at::Generator samples = MakeGenerator(seed, stream + 1);
  torch::Tensor means =
      at::randn({num_classes, channels, image_size, image_size}, structure, torch::kFloat32);
  torch::Tensor labels = at::randint(num_classes, {size}, samples, torch::kInt64);
  torch::Tensor noise =
      at::randn({size, channels, image_size, image_size}, samples, torch::kFloat32);
  torch::Tensor input = means.index_select(0, labels).add_(noise);
  return std::make_shared<TensorDataset>(std::move(input), std::move(labels));
}

absl::StatusOr<std::shared_ptr<Dataset>> SyntheticTokens(int64_t size, int64_t seq_len,
                                                         int64_t vocab, uint64_t seed,
                                                         uint64_t stream) {
  if (size < 1 || seq_len < 1 || vocab < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("SyntheticTokens needs size >= 1, seq_len >= 1 and vocab >= 3, got ", size,
                     ", ", seq_len, ", ", vocab));
  }
  at::Generator structure = MakeGenerator(seed, kStructureStream);
  at::Generator samples = MakeGenerator(seed, stream + 1);
  const int64_t first = kBosToken + 1;
  // mapping[t] for t in [first, vocab): a permutation of [first, vocab).
  torch::Tensor mapping =
      torch::cat({torch::arange(first, torch::kInt64),
                  at::randperm(vocab - first, structure, torch::kInt64).add_(first)});
  torch::Tensor source = at::randint(first, vocab, {size, seq_len}, samples, torch::kInt64);
  torch::Tensor target =
      mapping.index_select(0, source.flip({1}).reshape({-1})).reshape({size, seq_len});
  torch::Tensor decoder_input = torch::cat(
      {torch::full({size, 1}, kBosToken, torch::kInt64), target.slice(/*dim=*/1, 0, seq_len - 1)},
      /*dim=*/1);
  torch::Tensor input = torch::stack({source, decoder_input}, /*dim=*/1);
  return std::make_shared<TensorDataset>(std::move(input), std::move(target));
}

}  // namespace p3::models
