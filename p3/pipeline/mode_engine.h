// The interface between PipelineEngine (engine.h) and the two ways it trains: the 1F1B
// stage pipeline (stage_engine.h: spectrain, pipedream, stale, vanilla) and data
// parallelism (data_parallel_engine.h), which share no schedule.
//
// PipelineEngine owns the replicas of the model (StageReplica), one thread per stage,
// the job hand-out and the first error. A ModeEngine owns the channels between those
// threads and what each thread does with the mini-batches of a job:
//
//   controlling thread:  Feed(count, source)     hands the mini-batches to the stages
//   stage thread k:      RunJob(k, job)          its part of the job, then
//                        EndJob(k)               leaves the real weights in the model
//   any thread:          Close()                 on the first error and at shutdown
//
// Thread-safety: RunJob(k) and EndJob(k) run only on stage k's thread; Feed() only on
// the controlling thread; Close() from any thread, at any time.
#ifndef P3_PIPELINE_MODE_ENGINE_H_
#define P3_PIPELINE_MODE_ENGINE_H_

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "models/dataset.h"
#include "models/model.h"
#include "p3/pipeline/engine_options.h"
#include "p3/pipeline/partition.h"
#include "p3/pipeline/stage_sgd.h"

namespace p3::pipeline {

// One stage's replica of the model (data_parallel: one whole replica), built by
// PipelineEngine::Create() and used by stage thread `index` only.
struct StageReplica {
  int index = 0;
  torch::Device device{torch::kCPU};
  std::shared_ptr<models::BlockModel> model;
  StageRange range;  // the blocks it runs (data_parallel: all of them)
  // Its optimizer; with spectrain and pipedream it keeps the real weights apart.
  std::unique_ptr<StageSgd> sgd;
};

// One Train() call, as the stage threads see it.
struct TrainJob {
  int64_t count = 0;  // mini-batches 0..count-1
  absl::Time start;   // when Train() started, for TrainStats::done_seconds
  // Sized `count` by Train(); losses[i] and done_seconds[i] are written once each, by the
  // thread the ModeEngine designates.
  TrainStats* stats = nullptr;
};

class ModeEngine {
 public:
  virtual ~ModeEngine() = default;

  // Stage k's part of `job`. An InternalError naming the stage, the pass and the
  // mini-batch when libtorch fails; CancelledError when a channel was closed (another
  // part failed, or shutdown).
  virtual absl::Status RunJob(int k, const TrainJob& job) = 0;

  // Hands source(0), ..., source(count-1) to the stages, in order. The source's error
  // (its code, "loading mini-batch i: " before its message) or an InvalidArgumentError
  // for a mini-batch the mode cannot take; OK when a channel was closed (the stage that
  // closed it reports why).
  virtual absl::Status Feed(int64_t count, const BatchSource& source) = 0;

  // After every RunJob(k), whether it succeeded or not: drops what is still in flight on
  // stage k and puts the real weights back into its model (for Infer(), Parameters()).
  virtual absl::Status EndJob(int k) = 0;

  // Wakes every thread waiting in a channel; from then on RunJob() and Feed() return
  // at once. Idempotent; final.
  virtual void Close() = 0;
};

// source(i), with "loading mini-batch i: " before the message of its error (its code
// kept). For ModeEngine::Feed().
absl::StatusOr<models::Batch> LoadBatch(const BatchSource& source, int64_t i);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_MODE_ENGINE_H_
