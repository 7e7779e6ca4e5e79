// Fashion-MNIST from the IDX files of Debian's dataset-fashion-mnist package.
//
// Reads <dir>/{train,t10k}-images-idx3-ubyte.gz and <dir>/{train,t10k}-labels-idx1-ubyte.gz
// (gzip, or uncompressed under the same names). Images become float [N, 1, 28, 28]
// scaled to [0, 1] and then normalised with mean kFashionMnistMean and standard deviation
// kFashionMnistStd; labels int64 [N] in 0..9.
//
// Example:
//   P3_ASSIGN_OR_RETURN(auto train,   // p3/base/status_macros.h
//                       p3::models::LoadFashionMnist(p3::models::kFashionMnistDir, true));
//   p3::models::Batch b = train->Get({0, 1, 2});  // input [3, 1, 28, 28]
#ifndef P3_MODELS_FASHION_MNIST_H_
#define P3_MODELS_FASHION_MNIST_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/dataset.h"

namespace p3::models {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

// The training set (60,000 samples) when `train`, else the test set (10,000).
// NotFoundError naming the file when one is missing; DataLossError naming the file when
// one is corrupt: not gzip, wrong magic number, shorter than its header says, a label
// outside 0..9, or image and label counts that differ.
absl::StatusOr<std::shared_ptr<Dataset>> LoadFashionMnist(const std::string& dir, bool train);

}  // namespace p3::models

#endif  // P3_MODELS_FASHION_MNIST_H_
