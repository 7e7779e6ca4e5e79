// Measures what each block of a model costs to train, for the balanced partition
// (pipeline/partition.h).
//
// Each block runs on its own: its input is the previous block's output, detached, so
// that the backward of block i is timed alone (the last block's time includes the loss).
// One untimed warm-up batch comes first; the figures are medians over the rest. Given the
// stages' SGD options, each block's optimizer step is timed too (on copies of its
// weights: the model is not changed), since a stage pays for the update of its blocks
// on every mini-batch: on ResNet-50, whose last blocks hold most of the parameters, the
// update is about a sixth of the last stage's time.
//
// Example:
//   std::vector<models::Batch> batches = ...;  // e.g. the first 4 training batches
//   absl::StatusOr<std::vector<BlockProfile>> profile = ProfileBlocks(*model, batches);
//   std::vector<double> costs;
//   for (const BlockProfile& b : *profile) costs.push_back(b.forward_seconds + b.backward_seconds);
//   auto boundaries = BalancedBoundaries(costs, /*num_stages=*/2);
//
// Runs on the calling thread with its libtorch thread setting; the model is trained on
// nothing (gradients are computed and dropped) and must not be used by another thread.
#ifndef P3_PIPELINE_PROFILE_H_
#define P3_PIPELINE_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/dataset.h"
#include "models/model.h"
#include "p3/pipeline/stage_sgd.h"

namespace p3::pipeline {

struct BlockProfile {
  std::string name;
  double forward_seconds = 0;   // median per batch
  double backward_seconds = 0;  // median per batch
  double update_seconds = 0;    // median per batch; 0 when not profiled (no SGD options)
  int64_t parameters = 0;       // number of parameter elements
  int64_t output_bytes = 0;     // the block's output per batch: what a stage boundary hands on

  double seconds() const { return forward_seconds + backward_seconds + update_seconds; }
};

// InvalidArgumentError for fewer than 2 batches (one is the warm-up); InternalError with
// libtorch's message when a block fails.
absl::StatusOr<std::vector<BlockProfile>> ProfileBlocks(models::BlockModel& model,
                                                        const std::vector<models::Batch>& batches,
                                                        const SgdOptions* sgd = nullptr);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_PROFILE_H_
