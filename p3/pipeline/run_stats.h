// The figures a pipeline run (runner.h) derives from what PipelineEngine::Train()
// measured: an epoch's record, the steady-state rate, and the run's summary.
//
// Example:
//   EpochRecord record = EpochRecordFromStats(epoch, stats.losses, stats.done_seconds,
//                                             /*batch_size=*/32, /*warmup=*/5);
//   ...
//   SummarizeRun(all_losses, &result);  // samples_per_second, final_loss
//
// Plain functions, no state: thread-safe. No libtorch.
#ifndef P3_PIPELINE_RUN_STATS_H_
#define P3_PIPELINE_RUN_STATS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "p3/pipeline/run_result.h"

namespace p3::pipeline {

// Mini-batches whose losses RunResult::final_loss averages.
inline constexpr size_t kFinalLossWindow = 20;

// Samples per second of the mini-batches after the first `warmup` (the pipeline's fill
// and the first iterations' allocations), measured between their completion times
// (`done_seconds`, from the start of the epoch). With fewer than two mini-batches after
// the warm-up, the rate over the last two mini-batches; with one in all, over its own
// time. 0 when nothing can be measured.
double SteadyRate(const std::vector<double>& done_seconds, int64_t batch_size, int64_t warmup);

// The mean of the last min(window, size) values; 0 when empty.
double TailMean(const std::vector<double>& values, size_t window);

// Epoch `epoch`'s record from its mini-batches' losses and completion times (equal
// sizes): mean loss, the last completion time, SteadyRate(). No test accuracy.
EpochRecord EpochRecordFromStats(int epoch, const std::vector<double>& losses,
                                 const std::vector<double>& done_seconds, int64_t batch_size,
                                 int64_t warmup);

// result->samples_per_second := the median of the epochs' rates, result->final_loss :=
// TailMean(all_losses, kFinalLossWindow), with `all_losses` the run's mini-batch losses
// in order.
void SummarizeRun(const std::vector<double>& all_losses, RunResult* result);

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_RUN_STATS_H_
