// data_parallel behind PipelineEngine (engine.h): N replicas of the whole model, one
// thread each. Feed() splits every mini-batch into N shards (sizes differing by at most
// one, the first ones larger); each replica runs its shard forward and backward, the
// replicas average their gradients (weighted by shard size) through a GradientExchange
// (gradient_exchange.h), and the update is applied once: single-device training on the
// union batch. Replica 0 records the loss of the union batch (the shard losses weighted)
// and the completion time.
//
// Shared weights. When every replica is on the same device (the CPU), the replicas'
// parameters share replica 0's storage (each keeps its own gradients), and replica r
// updates only parameters j with j mod N == r: the ones whose averaged gradient it summed.
// The update is then split over the threads instead of repeated by each (on ResNet-50 it
// is a tenth of a single device's iteration), and no replica's weights need copying. A
// barrier after the update keeps every replica from starting its next forward before all
// shares are written. Replicas on different devices keep their own weights, and each
// applies the whole update.
//
// Thread-safety: as ModeEngine (mode_engine.h).
#ifndef P3_PIPELINE_DATA_PARALLEL_ENGINE_H_
#define P3_PIPELINE_DATA_PARALLEL_ENGINE_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "p3/pipeline/bounded_queue.h"
#include "p3/pipeline/engine_options.h"
#include "p3/pipeline/gradient_exchange.h"
#include "p3/pipeline/mode_engine.h"
#include "p3/pipeline/stage_timer.h"

namespace p3::pipeline {

class DataParallelEngine : public ModeEngine {
 public:
  // `replicas` (options.num_stages of them, each running every block) outlive the engine.
  DataParallelEngine(const PipelineOptions& options, std::vector<StageReplica*> replicas);

  absl::Status RunJob(int k, const TrainJob& job) override;
  // InvalidArgumentError for a mini-batch of fewer samples than replicas.
  absl::Status Feed(int64_t count, const BatchSource& source) override;
  // Nothing to do: the replicas' parameters are their real weights.
  absl::Status EndJob(int k) override { return absl::OkStatus(); }
  void Close() override;

 private:
  struct Shard {
    int64_t microbatch = 0;
    torch::Tensor input;
    torch::Tensor target;
    double weight = 1;  // this shard's share of the mini-batch
  };

  // Forward and backward of one shard on replica k: its gradients and its loss.
  absl::Status ComputeGradients(int k, const Shard& shard, std::vector<torch::Tensor>* grads,
                                double* loss, StageTimer& timer);
  // Replica k's rounds of the job, their time charged to `timer`.
  absl::Status RunRounds(int k, const TrainJob& job, StageTimer& timer);
  // The update with the averaged gradients, moved to replica k's device where needed.
  absl::Status ApplyUpdate(int k, int64_t i, const std::vector<torch::Tensor>& sum);
  void Emit(const PipelineEvent& event) const;

  // Blocks until every replica has called it for the current update (false once closed).
  bool UpdateBarrier();

  const PipelineOptions options_;
  const int n_;
  std::vector<StageReplica*> replicas_;
  // The replicas share replica 0's parameters (all on one device): see above.
  bool shared_weights_ = false;
  absl::Mutex barrier_mu_;
  int barrier_arrived_ ABSL_GUARDED_BY(barrier_mu_) = 0;
  int64_t barrier_round_ ABSL_GUARDED_BY(barrier_mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(barrier_mu_) = false;
  std::vector<std::unique_ptr<BoundedQueue<Shard>>> shards_;  // shards_[k] feeds replica k
  GradientExchange exchange_;
};

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_DATA_PARALLEL_ENGINE_H_
