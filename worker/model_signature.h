// What a worker tells the servers about its model and cluster (the handshake's
// ClusterSignature, p3/core/cluster_signature.h), and the model's parameters in plan order
// with the names errors give them: read once from the model when the Worker is created.
//
// Example:
//   P3_ASSIGN_OR_RETURN(ModelSignature m, DescribeModel(options, *model));
//   P3_ASSIGN_OR_RETURN(SlicePlan plan, SlicePlan::Create(m.entries, m.signature.plan));
//
// A pure function of its arguments.
#ifndef P3_WORKER_MODEL_SIGNATURE_H_
#define P3_WORKER_MODEL_SIGNATURE_H_

#include <torch/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "p3/core/cluster_signature.h"
#include "p3/core/slice_plan.h"
#include "worker/worker.h"

namespace p3 {

struct ModelSignature {
  ClusterSignature signature;
  std::vector<TensorEntry> entries;   // plan order: the blocks' parameters in forward order
  std::vector<torch::Tensor> params;  // the same order
  // For messages: the module's own name of each parameter with its block slot, e.g.
  // "fc1.weight (block 0 tensor 0)".
  std::vector<std::string> names;
};

// The signature of `model` under `options` (mode, plan options, cluster size, wire dtype).
// InvalidArgument naming a parameter that is not float32.
absl::StatusOr<ModelSignature> DescribeModel(const WorkerOptions& options,
                                             models::BlockModel& model);

// Where each block's tensors start in the model's parameter order, then the number of
// tensors: block b holds [result[b], result[b+1]).
std::vector<int> BlockTensors(models::BlockModel& model);
// The block of each tensor, in the model's parameter order.
std::vector<int> TensorBlocks(models::BlockModel& model);
std::vector<std::string> BlockNames(const models::BlockModel& model);
// [offset, count) of each block's values in `plan`'s flat buffers, given BlockTensors().
std::vector<std::pair<int64_t, int64_t>> BlockSpans(const std::vector<int>& block_tensors,
                                                    const SlicePlan& plan);

}  // namespace p3

#endif  // P3_WORKER_MODEL_SIGNATURE_H_
