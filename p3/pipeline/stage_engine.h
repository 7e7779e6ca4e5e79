// The 1F1B stage pipeline behind PipelineEngine (engine.h) for the modes spectrain,
// pipedream, stale and vanilla: stage k runs blocks [begin_k, end_k) of its replica and
// follows OneFOneBSchedule() (schedule.h).
//
// Interleaved 1F1B (mode vanilla only): the engine hands over one replica per virtual
// stage (several per thread, sharing the thread's model), every queue and in-flight table
// is per virtual stage, and thread k runs InterleavedSchedule() over its chunks; otherwise
// as gpipe (micro-batches, accumulation, one update per virtual stage and mini-batch).
//
// Schedules. Under 1f1b (PipeDream) the unit that flows through the stages is the
// mini-batch and each stage updates after each backward. Under gpipe (mode vanilla only)
// Feed() splits each mini-batch into PipelineOptions::microbatches units, every stage
// runs their forwards, then their backwards (GPipeSchedule()), the last stage
// back-propagates each micro-batch's mean loss times its share of the mini-batch's
// samples, gradients accumulate, and each stage updates once, after the mini-batch's last
// backward: the update of single-device training on the whole mini-batch (up to the
// order of the floating-point sums).
//
// Data path. Feed() puts the units into stage 0's forward queue; each stage passes
// its output (detached) forward and, in its backward, the gradient of its input back,
// through bounded queues of N + 1 items (in 1F1B no stage runs more than N forwards
// ahead of the next one, so N + 1 slots never block a stage that the schedule lets run;
// under gpipe a stage may run M forwards ahead, and a full queue only holds it until the
// next stage, which runs all its forwards first, takes the next one).
// The last stage computes the loss. A stage applies its update right after each backward,
// having handed its input's gradient on first.
//
// Weights, mini-batch i on stage k (v: SGD's momentum buffer, s: PredictionDistance()):
//   spectrain v1  forward with W - s_f lr v, backward with W - s_b lr v (current W, v)
//   spectrain v2  forward with W - s_f lr v; the backward reuses those weights (stashed)
//   pipedream     forward with the current W, stashed; the backward uses the stash
//   stale         forward and backward each with whatever W is current
//   vanilla       like stale, but with no warm-up forwards: one mini-batch in flight
// In spectrain and pipedream the replica's optimizer keeps the real weights apart and the
// stage writes the values each pass needs into the model's parameters (stage_sgd.h).
//
// Thread-safety: as ModeEngine (mode_engine.h).
#ifndef P3_PIPELINE_STAGE_ENGINE_H_
#define P3_PIPELINE_STAGE_ENGINE_H_

#include <c10/core/Event.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "p3/pipeline/bounded_queue.h"
#include "p3/pipeline/engine_options.h"
#include "p3/pipeline/mode_engine.h"
#include "p3/pipeline/schedule.h"
#include "p3/pipeline/stage_timer.h"

namespace p3::pipeline {

class StageEngine : public ModeEngine {
 public:
  // `options.mode` is one of spectrain, pipedream, stale, vanilla; `replicas` (one per
  // stage, options.num_stages of them; under interleaved 1F1B one per virtual stage,
  // num_stages * chunks, virtual stage v run by thread v mod num_stages) outlive the
  // engine.
  StageEngine(const PipelineOptions& options, std::vector<StageReplica*> replicas);

  absl::Status RunJob(int k, const TrainJob& job) override;
  absl::Status Feed(int64_t count, const BatchSource& source) override;
  absl::Status EndJob(int k) override;
  void Close() override;

 private:
  struct Message {
    // The unit of the schedule: the mini-batch (1f1b), or micro-batch j = i * M + m of
    // mini-batch i (gpipe, M micro-batches).
    int64_t microbatch = 0;
    torch::Tensor tensor;  // activation (forward) or gradient (backward)
    torch::Tensor target;  // forward only
    double weight = 1.0;   // forward only: the unit's share of its mini-batch's samples
    // On a device: recorded by the sending stage's stream after `tensor` was made
    // (stage_streams.h); null on the CPU.
    std::shared_ptr<c10::Event> ready;
  };
  // One mini-batch between its forward and its backward on a stage.
  struct InFlight {
    torch::Tensor input;               // the stage's input; a leaf with grad on stages > 0
    // The stage's output; the loss on the last stage. Undefined with recompute until the
    // backward reruns the forward.
    torch::Tensor output;
    // The forward's weights (pipedream, spectrain v2; with recompute also spectrain v1
    // and stale, to rerun the forward with them).
    std::vector<torch::Tensor> stash;
    // With recompute: what the last stage's loss needs again (its input is `input`).
    torch::Tensor target;
    double weight = 1.0;
    int64_t version = 0;               // updates applied when the forward ran
    int prediction = 0;                // s applied in the forward
  };
  struct Stage {
    StageReplica* replica = nullptr;
    std::map<int64_t, InFlight> in_flight;  // by unit (Message::microbatch)
    // What the parameters hold (spectrain, pipedream: the optimizer keeps the real
    // weights apart): the real weights after `working_version` updates, predicted
    // `working_prediction` ahead. Writes that would change nothing are skipped.
    int64_t working_version = 0;
    int working_prediction = 0;
    std::vector<std::vector<torch::Tensor>> free_stashes;  // reused weight copies

    // Parameters := the real weights after the current update count, predicted `s`
    // ahead (0: none; nothing before the first update). Returns the s applied.
    int SetWorkingPredicted(int s);
    // Parameters := a stash taken when they held (version, prediction).
    void SetWorkingStash(const InFlight& f);
  };

  // The forward of one mini-batch on `stage` and its hand-over to the next stage.
  // Stage k's steps of the job's schedule, their time charged to `timer`.
  absl::Status RunSteps(int k, const TrainJob& job, StageTimer& timer);
  absl::Status Forward(Stage& stage, int k, Message message, const TrainJob& job,
                       StageTimer& timer);
  // The backward of unit `j`, the hand-over of its input's gradient, the update (gpipe:
  // after the mini-batch's last micro-batch only).
  absl::Status Backward(Stage& stage, int k, int64_t j, const torch::Tensor& grad,
                        const TrainJob& job, StageTimer& timer);
  void Emit(const PipelineEvent& event) const;
  // Stage k's blocks on `x`; on the last stage followed by the loss (unweighted).
  torch::Tensor RunStage(const Stage& stage, int k, const torch::Tensor& x,
                         const torch::Tensor& target) const;
  // With recompute: reruns the forward of `f` with the weights its forward used, with
  // autograd, leaving the model's buffers (BatchNorm statistics) as they were; sets
  // f.output.
  void Recompute(Stage& stage, int k, InFlight& f) const;
  // Thread k's steps for `count` mini-batches under the schedule.
  std::vector<ScheduleStep> Steps(int k, int64_t count) const;
  // Whether the schedule splits mini-batches and accumulates gradients (gpipe,
  // interleaved 1F1B): the last stage weights each micro-batch's loss by its share.
  bool Accumulates() const { return options_.schedule != PipelineSchedule::kOneFOneB; }
  // Whether the backward uses the forward's weights (stashed): pipedream, spectrain v2.
  bool BackwardUsesStash() const;
  // Whether stage k reruns its forwards in the backward: every stage under
  // options.recompute, except the last one under 1F1B, whose backward follows its forward
  // at once (one unit in flight: a rerun would save nothing and cost a forward).
  bool RecomputesOn(int k) const {
    return options_.recompute &&
           !(options_.schedule == PipelineSchedule::kOneFOneB && k + 1 == n_);
  }

  const PipelineOptions options_;
  const int n_;        // stages; under interleaved 1F1B virtual stages
  const int threads_;  // stage threads (options.num_stages)
  std::vector<Stage> stages_;
  // forward_[k] feeds stage k (forward_[0] from Feed()); backward_[k] carries the
  // gradient of stage k's output from stage k+1.
  std::vector<std::unique_ptr<BoundedQueue<Message>>> forward_;
  std::vector<std::unique_ptr<BoundedQueue<Message>>> backward_;
};

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_STAGE_ENGINE_H_
