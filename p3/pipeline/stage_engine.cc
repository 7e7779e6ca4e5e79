#include "p3/pipeline/stage_engine.h"

#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/stage_memory.h"
#include "p3/pipeline/stage_streams.h"
#include "p3/pipeline/torch_errors.h"
#include "p3/base/status_macros.h"

namespace p3::pipeline {
namespace {

absl::Status Stopped(int k) {
  return absl::CancelledError(absl::StrCat("stage ", k, " stopped: another part failed"));
}

}  // namespace

int StageEngine::Stage::SetWorkingPredicted(int s) {
  StageSgd& sgd = *replica->sgd;
  const int64_t version = sgd.steps();
  const int applied = version > 0 && !sgd.velocity().empty() ? std::max(s, 0) : 0;
  if (!sgd.separate_real()) return 0;
  if (working_version != version || working_prediction != applied) {
    sgd.WritePredicted(applied);
    working_version = version;
    working_prediction = applied;
  }
  return applied;
}

void StageEngine::Stage::SetWorkingStash(const InFlight& f) {
  if (working_version != f.version || working_prediction != f.prediction) {
    replica->sgd->WriteWorking(f.stash);
    working_version = f.version;
    working_prediction = f.prediction;
  }
}

StageEngine::StageEngine(const PipelineOptions& options, std::vector<StageReplica*> replicas)
    : options_(options),
      n_(static_cast<int>(replicas.size())),
      threads_(options.num_stages),
      stages_(replicas.size()) {
  // Under interleaved 1F1B a virtual stage can receive a whole mini-batch's micro-batches
  // before its thread gets to them (it is busy with its other chunks).
  const size_t capacity =
      n_ + 1 + (options.schedule == PipelineSchedule::kInterleaved1F1B ? 2 * options.microbatches : 0);
  for (int k = 0; k < n_; ++k) {
    stages_[k].replica = replicas[k];
    forward_.push_back(std::make_unique<BoundedQueue<Message>>(capacity));
    backward_.push_back(std::make_unique<BoundedQueue<Message>>(capacity));
  }
}

void StageEngine::Close() {
  for (auto& q : forward_) q->Close();
  for (auto& q : backward_) q->Close();
}

void StageEngine::Emit(const PipelineEvent& event) const {
  if (options_.on_event) options_.on_event(event);
}

std::vector<ScheduleStep> StageEngine::Steps(int k, int64_t count) const {
  switch (options_.schedule) {
    case PipelineSchedule::kGPipe:
      return GPipeSchedule(count, options_.microbatches);
    case PipelineSchedule::kInterleaved1F1B:
      return InterleavedSchedule(threads_, k, options_.chunks, count, options_.microbatches);
    case PipelineSchedule::kOneFOneB:
      break;
  }
  return OneFOneBSchedule(n_, k, count, IsPipelined(options_.mode));
}

absl::Status StageEngine::RunJob(int k, const TrainJob& job) {
  StageTimes& times = job.stats->stage_times[k];
  StageTimer timer(options_.trace, absl::StrCat("stage ", k), &times);
  absl::Status status = RunSteps(k, job, timer);
  timer.Finish();
  job.stats->busy_seconds[k] = times.busy_seconds();
  return status;
}

absl::Status StageEngine::RunSteps(int k, const TrainJob& job, StageTimer& timer) {
  for (const ScheduleStep& step : Steps(k, job.count)) {
    const int v = step.chunk * threads_ + k;  // the (virtual) stage this step runs
    Stage& stage = stages_[v];
    std::optional<Message> message;
    if (step.pass == Pass::kForward || v + 1 < n_) {
      message = (step.pass == Pass::kForward ? forward_[v] : backward_[v])->Pop();
      if (!message) return Stopped(k);
      if (message->microbatch != step.microbatch) {
        return absl::InternalError(absl::StrCat("stage ", v, ": expected ", StepName(step),
                                                ", received mini-batch ", message->microbatch));
      }
      // On a device: this stage's stream waits for the sender's, not this thread.
      WaitReady(message->ready, message->tensor);
    }
    timer.Lap(WorkKind::kWait, "wait");
    P3_RETURN_IF_ERROR(step.pass == Pass::kForward
                           ? Forward(stage, v, std::move(*message), job, timer)
                           : Backward(stage, v, step.microbatch,
                                      message ? message->tensor : torch::Tensor(), job, timer));
  }
  return absl::OkStatus();
}

bool StageEngine::BackwardUsesStash() const {
  return options_.mode == WeightMode::kPipeDream ||
         (options_.mode == WeightMode::kSpecTrain && options_.spectrain_version == 2);
}

torch::Tensor StageEngine::RunStage(const Stage& stage, int k, const torch::Tensor& x,
                                    const torch::Tensor& target) const {
  const StageReplica& replica = *stage.replica;
  torch::Tensor y = x;
  for (int64_t b = replica.range.begin; b < replica.range.end; ++b) {
    y = replica.model->ForwardBlock(b, y);
  }
  if (k + 1 == n_) return replica.model->Loss(y, target.to(replica.device));
  return y;
}

void StageEngine::Recompute(Stage& stage, int k, InFlight& f) const {
  ScopedMemoryCategory category(MemoryCategory::kForward);
  // The forward's weights: its stash (pipedream, spectrain; stale with recompute), or
  // (vanilla, gpipe) the current ones, which no update has changed since the forward.
  if (!f.stash.empty()) stage.SetWorkingStash(f);
  // The forward already moved BatchNorm's running statistics; the rerun must not again.
  std::vector<torch::Tensor> buffers = stage.replica->model->buffers();
  std::vector<torch::Tensor> saved;
  {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& b : buffers) saved.push_back(b.clone());
  }
  torch::Tensor out = RunStage(stage, k, f.input, f.target);
  f.output = k + 1 == n_ && Accumulates() ? out * f.weight : out;
  // Through data(), which does not bump the version counter: the rerun's graph saved
  // the statistics for its backward (BatchNorm's kernel updates them in place the same
  // way).
  torch::NoGradGuard no_grad;
  for (size_t j = 0; j < buffers.size(); ++j) buffers[j].data().copy_(saved[j]);
}

absl::Status StageEngine::Forward(Stage& stage, int k, Message message, const TrainJob& job,
                                  StageTimer& timer) {
  const int64_t j = message.microbatch;        // the unit of the schedule
  const int64_t i = j / options_.microbatches;  // its mini-batch
  const int64_t part = j % options_.microbatches;
  const StageReplica& replica = *stage.replica;
  const bool recompute = RecomputesOn(k);
  // Recomputing a pipelined forward needs its weights again (v1 and stale keep none).
  // Stashing needs the real weights apart: a last stage, whose backward follows its
  // forward with no update between, keeps none (KeepsRealWeightsApart()).
  const bool stash = replica.sgd->separate_real() &&
                     (BackwardUsesStash() ||
                      (recompute && (options_.mode == WeightMode::kSpecTrain ||
                                     options_.mode == WeightMode::kStale)));
  bool pushed = true;
  ScopedMemoryCategory category(MemoryCategory::kForward);
  P3_RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat("stage ", k, ": forward of mini-batch ", i), [&]() -> absl::Status {
        InFlight f;
        torch::Tensor x = message.tensor.to(replica.device);
        if (k > 0) x = x.detach().requires_grad_(true);
        // The weights of this forward: the real ones (stale, vanilla: they are the
        // parameters), or predicted s ahead (spectrain; pipedream: s = 0).
        f.prediction = stage.SetWorkingPredicted(
            PredictionDistance(options_.mode, options_.spectrain_version, n_, k, Pass::kForward));
        f.version = replica.sgd->steps();
        if (stash) {
          ScopedMemoryCategory stash_category(MemoryCategory::kStash);
          if (!stage.free_stashes.empty()) {
            f.stash = std::move(stage.free_stashes.back());
            stage.free_stashes.pop_back();
          }
          replica.sgd->CopyWorking(&f.stash);
        }
        if (replica.sgd->separate_real()) timer.Lap(WorkKind::kWeights, "weights");
        torch::Tensor y;
        {
          // With recompute no graph is kept: the backward reruns this forward.
          std::optional<torch::NoGradGuard> no_grad;
          if (recompute) no_grad.emplace();
          y = RunStage(stage, k, x, message.target);
        }
        if (k + 1 == n_) {
          const double value = y.item<double>();
          if (Accumulates()) {
            // The mini-batch's mean loss is the micro-batches' means weighted by their
            // share of its samples; so are the gradients accumulated over the backwards.
            job.stats->losses[i] = (part == 0 ? 0 : job.stats->losses[i]) + message.weight * value;
            if (!recompute) f.output = y * message.weight;
          } else {
            job.stats->losses[i] = value;
            if (!recompute) f.output = y;
          }
        } else if (!recompute) {
          f.output = y;
        }
        f.input = x;
        timer.Lap(WorkKind::kForward, absl::StrCat("forward ", j));
        if (recompute) {
          f.target = message.target;
          f.weight = message.weight;
        }
        PipelineEvent event{k, Pass::kForward, i, f.version, f.prediction, 0, part};
        stage.in_flight.emplace(j, std::move(f));
        for (const auto& entry : stage.in_flight) {
          event.stashed += entry.second.stash.empty() ? 0 : 1;
        }
        // Before the hand-over, so that events are recorded in an order consistent with
        // the data flow (the next stage's forward of i comes after this one).
        Emit(event);
        if (k + 1 < n_) {
          pushed = forward_[k + 1]->Push(
              Message{j, y.detach(), message.target, message.weight, MarkReady(y)});
          timer.Lap(WorkKind::kWait, "hand-off");
        }
        return absl::OkStatus();
      }));
  return pushed ? absl::OkStatus() : Stopped(k);
}

absl::Status StageEngine::Backward(Stage& stage, int k, int64_t j, const torch::Tensor& grad,
                                   const TrainJob& job, StageTimer& timer) {
  const int64_t i = j / options_.microbatches;
  const int64_t part = j % options_.microbatches;
  // GPipe accumulates the micro-batches' gradients: zeroed before the first backward of
  // the mini-batch, applied after the last. 1F1B: one unit, both every time.
  const bool first = part == 0;
  const bool last = part + 1 == options_.microbatches;
  auto it = stage.in_flight.find(j);
  if (it == stage.in_flight.end()) {
    return absl::InternalError(
        absl::StrCat("stage ", k, ": backward of mini-batch ", i, " before its forward"));
  }
  InFlight& f = it->second;
  StageReplica& replica = *stage.replica;
  bool pushed = true;
  ScopedMemoryCategory category(MemoryCategory::kBackward);
  P3_RETURN_IF_ERROR(CatchTorchErrors(
      absl::StrCat("stage ", k, ": backward of mini-batch ", i), [&]() -> absl::Status {
        PipelineEvent event{k, Pass::kBackward, i, replica.sgd->steps(), 0, 0, part};
        if (RecomputesOn(k)) {
          Recompute(stage, k, f);
          timer.Lap(WorkKind::kForward, absl::StrCat("recompute ", j));
        }
        if (BackwardUsesStash() && !f.stash.empty()) {
          // The forward's weights: stashed (pipedream) or predicted (spectrain v2).
          event.weight_version = f.version;
          event.prediction = f.prediction;
          stage.SetWorkingStash(f);
        } else {
          // The current real weights (stale, vanilla: they are the parameters), or
          // predicted s ahead (spectrain v1).
          event.prediction = stage.SetWorkingPredicted(PredictionDistance(
              options_.mode, options_.spectrain_version, n_, k, Pass::kBackward));
        }
        if (replica.sgd->separate_real()) timer.Lap(WorkKind::kWeights, "weights");
        if (first) replica.sgd->ZeroGrad();
        if (k + 1 == n_) {
          f.output.backward();
        } else {
          torch::autograd::backward({f.output}, {grad.to(replica.device)});
        }
        for (const auto& entry : stage.in_flight) {
          if (entry.first != j && !entry.second.stash.empty()) ++event.stashed;
        }
        timer.Lap(WorkKind::kBackward, absl::StrCat("backward ", j));
        Emit(event);
        // Hand the input's gradient on before updating, so that the previous stage can
        // start its backward during this stage's update.
        if (k > 0) {
          pushed = backward_[k - 1]->Push(
              Message{j, f.input.grad(), {}, 1.0, MarkReady(f.input.grad())});
          timer.Lap(WorkKind::kWait, "hand-off");
        }
        if (last) {
          ScopedMemoryCategory optimizer(MemoryCategory::kOptimizer);
          replica.sgd->Step();
          timer.Lap(WorkKind::kUpdate, "update");
        }
        return absl::OkStatus();
      }));
  if (!f.stash.empty()) stage.free_stashes.push_back(std::move(f.stash));
  stage.in_flight.erase(it);
  if (k == 0 && last) {
    job.stats->done_seconds[i] = absl::ToDoubleSeconds(absl::Now() - job.start);
    if (options_.on_done) options_.on_done(i, job.stats->losses[i]);
  }
  return pushed ? absl::OkStatus() : Stopped(k);
}

absl::Status StageEngine::Feed(int64_t count, const BatchSource& source) {
  const int64_t parts = options_.microbatches;
  for (int64_t i = 0; i < count; ++i) {
    P3_ASSIGN_OR_RETURN(models::Batch batch, LoadBatch(source, i));
    if (parts == 1) {
      if (!forward_[0]->Push(Message{i, std::move(batch.input), std::move(batch.target), 1.0})) {
        return absl::OkStatus();  // a stage failed; its error is already recorded
      }
      continue;
    }
    const int64_t size = batch.input.size(0);
    if (size < parts) {
      return absl::InvalidArgumentError(absl::StrCat(PipelineScheduleName(options_.schedule),
                                                     " splits each mini-batch into ", parts,
                                                     " micro-batches; mini-batch ", i, " has ",
                                                     size, " samples"));
    }
    int64_t offset = 0;
    for (int64_t m = 0; m < parts; ++m) {
      const int64_t rows = size / parts + (m < size % parts ? 1 : 0);
      Message message{i * parts + m, batch.input.narrow(0, offset, rows),
                      batch.target.narrow(0, offset, rows),
                      static_cast<double>(rows) / static_cast<double>(size)};
      offset += rows;
      if (!forward_[0]->Push(std::move(message))) return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status StageEngine::EndJob(int k) {
  for (int v = k; v < n_; v += threads_) {
    Stage& stage = stages_[v];
    for (auto& entry : stage.in_flight) {
      if (!entry.second.stash.empty()) stage.free_stashes.push_back(std::move(entry.second.stash));
    }
    stage.in_flight.clear();
    // The model holds the real weights between runs (for Infer(), Parameters()).
    P3_RETURN_IF_ERROR(CatchTorchErrors(absl::StrCat("stage ", v), [&]() -> absl::Status {
      stage.SetWorkingPredicted(0);
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

}  // namespace p3::pipeline
