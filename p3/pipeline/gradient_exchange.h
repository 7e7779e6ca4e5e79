// data_parallel's all-reduce between the replica threads of one process (docs/pipeline.md).
//
// Every replica hands in its gradients once per round, with its shard's weight (its share
// of the mini-batch) and loss. Once all have, each replica sums its share of the
// parameters (j mod N == replica), weighted, into buffers kept across rounds, in replica
// order (so every run adds in the same order, whatever the threads' timing); once all
// shares are done every replica reads the whole sum and the weighted loss. A replica's
// gradients and the sums stay untouched until everyone has passed: nobody starts the
// next round's reduction before every replica handed in its next gradients, i.e.
// finished reading this round's result.
//
// Example (replica r's thread, each round):
//   std::optional<GradientExchange::Result> sum =
//       exchange.Reduce(r, std::move(grads), shard_share, shard_loss, torch::kCPU);
//   if (!sum) return;                     // closed: another replica failed
//   optimizer.Step(*sum->grads);          // valid until this replica's next Reduce()
//
// Thread-safe: one thread per replica calls Reduce(); Close() from any thread.
#ifndef P3_PIPELINE_GRADIENT_EXCHANGE_H_
#define P3_PIPELINE_GRADIENT_EXCHANGE_H_

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace p3::pipeline {

class GradientExchange {
 public:
  struct Result {
    // Sum over the replicas of weight_r * grads_r[j], on the device given to Reduce();
    // undefined where no replica had a gradient. Valid until the next round.
    const std::vector<torch::Tensor>* grads = nullptr;
    double loss = 0;  // sum over the replicas of weight_r * loss_r
  };

  // `num_replicas` >= 1 threads take part in every round.
  explicit GradientExchange(int num_replicas);

  GradientExchange(const GradientExchange&) = delete;
  GradientExchange& operator=(const GradientExchange&) = delete;

  // Replica `replica`'s contribution to the current round (every replica hands in the
  // same number of gradients, in the same order); blocks until the round is complete.
  // std::nullopt once closed (also when the close came during the round). Throws what
  // libtorch throws while summing.
  std::optional<Result> Reduce(int replica, std::vector<torch::Tensor> grads, double weight,
                               double loss, const torch::Device& device);

  // Wakes every waiting replica; Reduce() returns std::nullopt from now on. Idempotent.
  void Close();

 private:
  // Sums replica `replica`'s share of the parameters. Reads grads_ and weights_ without
  // the lock: nobody writes them until every replica has finished its share.
  void SumShare(int replica, size_t count,
                const torch::Device& device) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const int n_;
  absl::Mutex mu_;
  // Written under mu_ before the round's reduction starts and read (not changed) during
  // it; sums_[j] belongs to replica j mod N during the reduction.
  std::vector<std::vector<torch::Tensor>> grads_;
  std::vector<double> weights_ ABSL_GUARDED_BY(mu_);
  std::vector<double> losses_ ABSL_GUARDED_BY(mu_);
  std::vector<torch::Tensor> sums_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int reduced_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t all_arrived_ ABSL_GUARDED_BY(mu_) = 0;  // rounds whose gradients are all in
  int64_t round_ ABSL_GUARDED_BY(mu_) = 0;        // rounds completed
  double loss_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_GRADIENT_EXCHANGE_H_
