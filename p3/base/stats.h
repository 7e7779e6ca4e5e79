// Summary statistics used by every report of the project (throughput, profiles).
#ifndef P3_P3_BASE_STATS_H_
#define P3_P3_BASE_STATS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace p3 {

// The median of `values` (the mean of the two middle ones for an even count); 0 when
// empty. Takes a copy, which it sorts.
double Median(std::vector<double> values);

// The median of a stream of values in bounded memory: a run's per-iteration rates, of
// which a long job has millions (docs/results/reliability/soak.md, "Creep without
// faults"). Each value is counted in a bucket of a logarithmic scale; Median() answers
// with the middle buckets' centres, within a factor of (1 + relative_resolution / 2) of
// what Median() above gives for the same values. A value that is not positive and finite
// counts as 0; one beyond [kMinValue, kMaxValue] as that bound.
//
// Memory: one counter per bucket between the smallest and the largest positive value,
// ln(largest / smallest) / relative_resolution of them (with slack for growth; 330 KB at
// most at the default resolution), however many values are added. The counters are one
// array, grown rarely, not a node per bucket: small long-lived allocations made all
// through a run scatter over glibc's heap and keep it from reusing its holes (measured,
// soak.md).
//
// Example:
//   StreamingMedian rates;
//   for (...) rates.Add(samples_per_second);
//   double median = rates.Median();
//
// Not thread-safe: one owner adds and reads.
class StreamingMedian {
 public:
  static constexpr double kMinValue = 1e-6;
  static constexpr double kMaxValue = 1e12;

  // Default: buckets 0.1 % wide (Median() within 0.05 %).
  explicit StreamingMedian(double relative_resolution = 1e-3);

  void Add(double value);
  int64_t count() const { return count_; }
  // Counters held (the memory held, in int64_t).
  size_t buckets() const { return counts_.size(); }
  // 0 when empty.
  double Median() const;

 private:
  double Centre(int64_t bucket) const;

  double log_step_;
  // counts_[i]: the positive values in bucket first_bucket_ + i.
  std::vector<int64_t> counts_;
  int64_t first_bucket_ = 0;
  int64_t zeros_ = 0;  // values that are not positive and finite
  int64_t count_ = 0;
};

}  // namespace p3

#endif  // P3_P3_BASE_STATS_H_
