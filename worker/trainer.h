// A complete training run from an experiment config: the loop the `p3_worker` binary
// runs, for one worker of a cluster or for the `local` reference.
//
// Example:
//   auto config = p3::config::LoadConfig("configs/default.textproto", {});
//   p3::TrainerOptions options;
//   options.rank = 1;
//   options.servers = {"127.0.0.1:40001", "127.0.0.1:40002"};
//   absl::StatusOr<p3::TrainResult> result = p3::RunTraining(*config, options);
#ifndef P3_WORKER_TRAINER_H_
#define P3_WORKER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "p3/core/mode.h"
#include "p3/core/optimizer.h"
#include "p3/core/slice_search.h"
#include "p3/base/trace.h"
#include "proto/config.pb.h"
#include "worker/worker.h"

namespace p3 {

struct TrainerOptions {
  // This worker's rank. Default: 0.
  int rank = 0;
  // host:port of every server, in server order; empty in mode "local".
  std::vector<std::string> servers;
  // Where PROGRESS lines go (every training.log_every iterations); null for none.
  std::ostream* progress = nullptr;
  // Timeline of the run (cluster modes); not owned, may be null. Default: none.
  TraceRecorder* trace = nullptr;
  // Where to write the trained model as a PyTorch state dict (models/state_dict.h) at the
  // end of the run; its folder is created. p3_worker passes ModelFileFromConfig()
  // (proto/config_options.h) on rank 0. BatchNorm's running statistics are this worker's
  // own (docs/config.md#output). Default: "" (not written).
  std::string model_file;
  // This process replaces a dead worker of the same rank (p3_worker --rejoin, passed by
  // launch_cluster --max_restarts): it resumes at the cluster's iteration
  // (WorkerOptions::rejoin). Default: false.
  bool rejoin = false;
  // Elastic runs (cluster.elastic; docs/reliability.md, "Elastic membership"). This
  // process joins a running cluster (p3_worker --elastic_join): once it has said Hello to
  // every server it appends `join RANK` to `membership_requests` and starts at the
  // iteration rank 0's change makes it present at. Default: false.
  bool elastic_join = false;
  // The requests file (p3_worker --membership_requests): rank 0 reads its new lines
  // (`join R`, `leave R`) between iterations and asks for the change. Default: "" (none).
  std::string membership_requests;
  // Where the per-iteration records go as the run goes, in RecordsCsv()'s form: the header
  // first, then each epoch's rows once the epoch has ended, the last epoch's at the end of
  // the run (its test accuracy is measured last). TrainResult::records then holds only the
  // rows not yet written (at most an epoch's; none when RunTraining returns), so a long
  // run's memory does not grow with its iterations (32 bytes each; p3_worker passes its
  // --records_file here, docs/results/reliability/soak.md, "Creep without faults"). Not
  // owned; errors are the owner's to check (the stream's state). Default: null (every
  // record is kept in TrainResult::records).
  std::ostream* records = nullptr;
};

struct IterationRecord {
  int64_t iteration = 0;
  double loss = 0;
  double seconds = 0;
  double samples_per_second = 0;  // the whole cluster's samples / this iteration's time
};

// One epoch of training (a last, incomplete epoch of a run that stops mid-epoch too).
struct EpochRecord {
  int64_t epoch = 0;                    // 1 for the first
  int64_t end_iteration = 0;            // the epoch's last iteration + 1
  double train_loss = 0;                // mean of this worker's batch losses in the epoch
  std::optional<double> test_accuracy;  // rank 0 only, when training.evaluate
};

struct TrainResult {
  int rank = 0;
  int64_t iterations = 0;
  // Median over the iterations after warm-up.
  double samples_per_second = 0;
  // Mean training loss of the last 20 iterations (this worker's batches).
  double final_loss = 0;
  std::optional<double> test_accuracy;  // rank 0 only, when training.evaluate
  double param_l2 = 0;
  double wall_seconds = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  // Values exchanged with colocated servers through shared memory (WorkerStats).
  int64_t bytes_shared = 0;
  double forward_wait_seconds = 0;
  // Absolute path of the state dict written (TrainerOptions::model_file); "" if none.
  std::string model_file;
  // Every iteration's record, or only those not yet written to TrainerOptions::records.
  std::vector<IterationRecord> records;
  std::vector<EpochRecord> epochs;
  // Elastic runs: the membership changes this worker knows of, the first from iteration 0
  // (empty otherwise); samples the whole cluster trained in the run.
  std::vector<MembershipChange> membership;
  int64_t samples_trained = 0;
  // Elastic runs: the iterations this worker trained (a worker that joined or left
  // trained fewer than `iterations`, the run's).
  int64_t iterations_trained = 0;
  // Rank 0 with scheduling.online_search: what the search timed and chose, once it is done.
  std::optional<SliceSearchReport> search;

  std::string ToJson() const;
  // One row per iteration:
  //   iteration,loss,iteration_seconds,samples_per_second,epoch,epoch_loss,test_accuracy
  // `epoch` (from 1) on every row; epoch_loss and test_accuracy only on the row that ends
  // an epoch (test_accuracy only where it was measured), empty elsewhere.
  std::string RecordsCsv() const;
  // RecordsCsv()'s header line (with its newline); its rows of `records` alone, written
  // to `out`, each row's epoch looked up in `epochs` from index `first_epoch` on (every
  // record must belong to an epoch from there, or to one not yet in `epochs`).
  static const char kRecordsCsvHeader[];
  void WriteRecordsCsvRows(std::ostream& out, size_t first_epoch = 0) const;
};

// Trains per `config` (defaults filled, validated) and returns the figures. With
// model.init_from set, the model starts from that state dict (every rank loads it; rank 0's
// values are the ones the servers take). With model.output_pieces, model.pt and
// init_from use the whole output layer's names (models/output_pieces.h).
//
// Leaves process-wide state alone: training.threads is applied by the caller (p3_worker's
// main calls torch::set_num_threads before this), so a program that trains several
// configs, or sets its own thread count, is not overridden.
absl::StatusOr<TrainResult> RunTraining(const config::ExperimentConfig& config,
                                        const TrainerOptions& options);

// The worker library's options for worker `options.rank` of the cluster `config`
// (defaults filled, validated) describes, in `mode` (not kLocal): the scheduling fields,
// the peer timeout and the security settings, whose files it reads (errors name the
// field).
absl::StatusOr<WorkerOptions> WorkerOptionsFromConfig(const config::ExperimentConfig& config,
                                                      Mode mode, const TrainerOptions& options);

}  // namespace p3

#endif  // P3_WORKER_TRAINER_H_
