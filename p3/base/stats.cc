#include "p3/base/stats.h"

#include <algorithm>

namespace p3 {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t n = values.size();
  std::nth_element(values.begin(), values.begin() + n / 2, values.end());
  const double upper = values[n / 2];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + n / 2);
  return 0.5 * (lower + upper);
}

}  // namespace p3
