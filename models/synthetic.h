// Deterministic synthetic data sets: the same arguments give bit-identical data (with the
// same libtorch build), so every worker can build its copy locally.
//
// Example:
//   auto train = p3::models::SyntheticImages(/*size=*/1024, /*channels=*/3,
//                                            /*image_size=*/32, /*num_classes=*/10,
//                                            /*seed=*/1);
//   auto test = p3::models::SyntheticImages(256, 3, 32, 10, /*seed=*/1, /*stream=*/1);
//   auto text = p3::models::SyntheticTokens(/*size=*/512, /*seq_len=*/16, /*vocab=*/100,
//                                           /*seed=*/1);
#ifndef P3_MODELS_SYNTHETIC_H_
#define P3_MODELS_SYNTHETIC_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "models/dataset.h"
#include "models/sequence.h"  // kPadToken, kBosToken

namespace p3::models {

// `size` labelled images, input float [size, channels, image_size, image_size] and target
// int64 [size] uniform in [0, num_classes). Each class has a fixed random mean image
// (drawn from `seed` alone); a sample is its class mean plus unit Gaussian noise, so the
// labels are learnable (a linear classifier reaches high accuracy). Samples and labels
// are drawn from (`seed`, `stream`): use one stream for training and another for a test
// set with the same classes. InvalidArgumentError unless every size is >= 1.
absl::StatusOr<std::shared_ptr<Dataset>> SyntheticImages(int64_t size, int64_t channels,
                                                         int64_t image_size, int64_t num_classes,
                                                         uint64_t seed, uint64_t stream = 0);

// `size` sequence pairs for the sequence models, laid out as models/sequence.h describes:
// input int64 [size, 2, seq_len], row 0 the source tokens, row 1 the decoder's input
// (kBosToken then the target shifted right by one); target int64 [size, seq_len], the
// next tokens to predict. Source tokens are uniform in [2, vocab); the target is the
// source reversed and passed through a fixed random permutation of [2, vocab) drawn from
// `seed`, so it is learnable with attention. Samples come from (`seed`, `stream`).
// InvalidArgumentError unless size >= 1, seq_len >= 1 and vocab >= 3.
absl::StatusOr<std::shared_ptr<Dataset>> SyntheticTokens(int64_t size, int64_t seq_len,
                                                         int64_t vocab, uint64_t seed,
                                                         uint64_t stream = 0);

}  // namespace p3::models

#endif  // P3_MODELS_SYNTHETIC_H_
