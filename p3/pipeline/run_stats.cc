#include "p3/pipeline/run_stats.h"

#include <algorithm>

#include "p3/base/stats.h"

namespace p3::pipeline {

double SteadyRate(const std::vector<double>& done_seconds, int64_t batch_size, int64_t warmup) {
  const int64_t n = static_cast<int64_t>(done_seconds.size());
  if (n == 0) return 0;
  const int64_t w = std::min<int64_t>(std::max<int64_t>(warmup, 0), n - 2);
  if (w < 0) return done_seconds[0] > 0 ? batch_size / done_seconds[0] : 0;
  const double span = done_seconds[n - 1] - done_seconds[w];
  return span > 0 ? static_cast<double>(batch_size * (n - 1 - w)) / span : 0;
}

double TailMean(const std::vector<double>& values, size_t window) {
  const size_t tail = std::min(window, values.size());
  if (tail == 0) return 0;
  double sum = 0;
  for (size_t i = values.size() - tail; i < values.size(); ++i) sum += values[i];
  return sum / static_cast<double>(tail);
}

EpochRecord EpochRecordFromStats(int epoch, const std::vector<double>& losses,
                                 const std::vector<double>& done_seconds, int64_t batch_size,
                                 int64_t warmup) {
  EpochRecord record;
  record.epoch = epoch;
  record.iterations = static_cast<int64_t>(losses.size());
  record.train_loss = TailMean(losses, losses.size());
  record.seconds = done_seconds.empty() ? 0 : done_seconds.back();
  record.samples_per_second = SteadyRate(done_seconds, batch_size, warmup);
  return record;
}

void SummarizeRun(const std::vector<double>& all_losses, RunResult* result) {
  std::vector<double> rates;
  for (const EpochRecord& e : result->epochs) rates.push_back(e.samples_per_second);
  result->samples_per_second = Median(rates);
  result->final_loss = TailMean(all_losses, kFinalLossWindow);
}

}  // namespace p3::pipeline
