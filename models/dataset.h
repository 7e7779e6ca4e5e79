// Data sets and the deterministic, sharded order in which workers read them.
//
// Example:
//   P3_ASSIGN_OR_RETURN(auto train,   // p3/base/status_macros.h
//                       p3::models::LoadFashionMnist("/usr/share/datasets/fashion-mnist", true));
//   p3::models::ShardedSampler sampler({.dataset_size = train->size(),
//                                       .batch_size = 32, .num_workers = 2, .rank = 1});
//   Batch b = train->Get(sampler.Indices(/*iteration=*/0));
#ifndef P3_MODELS_DATASET_H_
#define P3_MODELS_DATASET_H_

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace p3::models {

struct Batch {
  torch::Tensor input;   // e.g. [B, 1, 28, 28] float32
  torch::Tensor target;  // e.g. [B] int64
};

// An in-memory data set. Get() is safe to call from several threads at once.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The samples at `indices`, stacked in that order.
  virtual Batch Get(const std::vector<int64_t>& indices) const = 0;
};

}  // namespace p3::models

#endif  // P3_MODELS_DATASET_H_
