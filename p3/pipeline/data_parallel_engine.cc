#include "p3/pipeline/data_parallel_engine.h"

#include <torch/torch.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "p3/pipeline/torch_errors.h"
#include "p3/base/status_macros.h"

namespace p3::pipeline {
namespace {

absl::Status Stopped(int k) {
  return absl::CancelledError(absl::StrCat("replica ", k, " stopped: another part failed"));
}

}  // namespace

DataParallelEngine::DataParallelEngine(const PipelineOptions& options,
                                       std::vector<StageReplica*> replicas)
    : options_(options),
      n_(static_cast<int>(replicas.size())),
      replicas_(std::move(replicas)),
      exchange_(n_) {
  for (int k = 0; k < n_; ++k) shards_.push_back(std::make_unique<BoundedQueue<Shard>>(n_ + 1));
  shared_weights_ = n_ > 1;
  for (int k = 1; k < n_; ++k) {
    if (replicas_[k]->device != replicas_[0]->device) shared_weights_ = false;
  }
  if (shared_weights_) {
    // Parameter j of every replica becomes a view of replica 0's: set_data() swaps the
    // storage and keeps the tensor's own autograd state (its gradient).
    torch::NoGradGuard no_grad;
    const std::vector<torch::Tensor>& owner = replicas_[0]->sgd->params();
    for (int k = 1; k < n_; ++k) {
      const std::vector<torch::Tensor>& params = replicas_[k]->sgd->params();
      for (size_t j = 0; j < params.size() && j < owner.size(); ++j) {
        torch::Tensor p = params[j];
        p.set_data(owner[j].data());
      }
    }
  }
}

void DataParallelEngine::Close() {
  for (auto& q : shards_) q->Close();
  exchange_.Close();
  absl::MutexLock lock(&barrier_mu_);
  closed_ = true;
}

bool DataParallelEngine::UpdateBarrier() {
  absl::MutexLock lock(&barrier_mu_);
  if (closed_) return false;
  const int64_t round = barrier_round_;
  if (++barrier_arrived_ == n_) {
    barrier_arrived_ = 0;
    ++barrier_round_;
    return true;
  }
  auto passed = [this, round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(barrier_mu_) {
    return closed_ || barrier_round_ > round;
  };
  barrier_mu_.Await(absl::Condition(&passed));
  return barrier_round_ > round;
}

void DataParallelEngine::Emit(const PipelineEvent& event) const {
  if (options_.on_event) options_.on_event(event);
}

absl::Status DataParallelEngine::RunJob(int k, const TrainJob& job) {
  StageTimes& times = job.stats->stage_times[k];
  StageTimer timer(options_.trace, absl::StrCat("replica ", k), &times);
  absl::Status status = RunRounds(k, job, timer);
  timer.Finish();
  job.stats->busy_seconds[k] = times.busy_seconds();
  return status;
}

absl::Status DataParallelEngine::RunRounds(int k, const TrainJob& job, StageTimer& timer) {
  StageReplica& replica = *replicas_[k];
  for (int64_t i = 0; i < job.count; ++i) {
    std::optional<Shard> shard = shards_[k]->Pop();
    if (!shard) return Stopped(k);
    timer.Lap(WorkKind::kWait, "wait");
    const int64_t version = replica.sgd->steps();
    std::vector<torch::Tensor> grads;
    double loss = 0;
    P3_RETURN_IF_ERROR(ComputeGradients(k, *shard, &grads, &loss, timer));
    std::optional<GradientExchange::Result> sum;
    P3_RETURN_IF_ERROR(CatchTorchErrors(
        absl::StrCat("replica ", k, ": averaging mini-batch ", i, "'s gradients"),
        [&]() -> absl::Status {
          sum = exchange_.Reduce(k, std::move(grads), shard->weight, loss, replicas_[0]->device);
          return absl::OkStatus();
        }));
    if (!sum) return Stopped(k);
    timer.Lap(WorkKind::kWeights, "all-reduce");
    P3_RETURN_IF_ERROR(ApplyUpdate(k, i, *sum->grads));
    timer.Lap(WorkKind::kUpdate, "update");
    if (shared_weights_) {
      if (!UpdateBarrier()) return Stopped(k);
      timer.Lap(WorkKind::kWait, "update barrier");
    }
    if (k == 0) {
      job.stats->losses[i] = sum->loss;
      job.stats->done_seconds[i] = absl::ToDoubleSeconds(absl::Now() - job.start);
      if (options_.on_done) options_.on_done(i, sum->loss);
    }
    Emit({k, Pass::kBackward, i, version, 0, 0});
    timer.Skip();
  }
  return absl::OkStatus();
}

absl::Status DataParallelEngine::ComputeGradients(int k, const Shard& shard,
                                                  std::vector<torch::Tensor>* grads, double* loss,
                                                  StageTimer& timer) {
  StageReplica& replica = *replicas_[k];
  const int64_t i = shard.microbatch;
  const int64_t version = replica.sgd->steps();
  torch::Tensor loss_tensor;
  P3_RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat("replica ", k, ": forward of mini-batch ", i), [&]() -> absl::Status {
        torch::Tensor y = shard.input.to(replica.device);
        replica.sgd->ZeroGrad();
        for (int64_t b = replica.range.begin; b < replica.range.end; ++b) {
          y = replica.model->ForwardBlock(b, y);
        }
        loss_tensor = replica.model->Loss(y, shard.target.to(replica.device));
        *loss = loss_tensor.item<double>();
        return absl::OkStatus();
      }));
  timer.Lap(WorkKind::kForward, absl::StrCat("forward ", i));
  Emit({k, Pass::kForward, i, version, 0, 0});
  timer.Skip();
  P3_RETURN_IF_ERROR(CatchTorchErrors(absl::StrCat("replica ", k, ": backward of mini-batch ", i),
                                      [&]() -> absl::Status {
                                        loss_tensor.backward();
                                        for (const torch::Tensor& p : replica.sgd->params())
                                          grads->push_back(p.grad());
                                        return absl::OkStatus();
                                      }));
  timer.Lap(WorkKind::kBackward, absl::StrCat("backward ", i));
  return absl::OkStatus();
}

absl::Status DataParallelEngine::ApplyUpdate(int k, int64_t i,
                                             const std::vector<torch::Tensor>& sum) {
  StageReplica& replica = *replicas_[k];
  return CatchTorchErrors(absl::StrCat("replica ", k, ": update of mini-batch ", i),
                          [&]() -> absl::Status {
                            if (shared_weights_) {
                              replica.sgd->Step(sum, k, n_);  // its share
                              return absl::OkStatus();
                            }
                            if (replica.device == replicas_[0]->device) {
                              replica.sgd->Step(sum);
                              return absl::OkStatus();
                            }
                            std::vector<torch::Tensor> moved;
                            for (const torch::Tensor& g : sum)
                              moved.push_back(g.defined() ? g.to(replica.device) : g);
                            replica.sgd->Step(moved);
                            return absl::OkStatus();
                          });
}

absl::Status DataParallelEngine::Feed(int64_t count, const BatchSource& source) {
  for (int64_t i = 0; i < count; ++i) {
    P3_ASSIGN_OR_RETURN(const models::Batch batch, LoadBatch(source, i));
    const int64_t size = batch.input.size(0);
    if (size < n_) {
      return absl::InvalidArgumentError(absl::StrCat("data_parallel splits each mini-batch over ",
                                                     n_, " replicas; mini-batch ", i, " has ", size,
                                                     " samples"));
    }
    int64_t offset = 0;
    for (int r = 0; r < n_; ++r) {
      const int64_t rows = size / n_ + (r < size % n_ ? 1 : 0);
      Shard shard{i, batch.input.narrow(0, offset, rows), batch.target.narrow(0, offset, rows),
                  static_cast<double>(rows) / static_cast<double>(size)};
      offset += rows;
      if (!shards_[r]->Push(std::move(shard))) return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

}  // namespace p3::pipeline
