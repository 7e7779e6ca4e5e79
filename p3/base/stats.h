// Summary statistics used by every report of the project (throughput, profiles).
#ifndef P3_P3_BASE_STATS_H_
#define P3_P3_BASE_STATS_H_

#include <vector>

namespace p3 {

// The median of `values` (the mean of the two middle ones for an even count); 0 when
// empty. Takes a copy, which it sorts.
double Median(std::vector<double> values);

}  // namespace p3

#endif  // P3_P3_BASE_STATS_H_
