// The PROGRESS line: how a training process (worker, pipeline trainer) reports its
// progress on stdout and how the launcher reads it. One definition for both sides.
//
//   PROGRESS iteration=<i> total=<n> loss=<float> [samples_per_second=<float>]
//            [sent_mbps=<float> received_mbps=<float>]
//
// `iteration` counts finished iterations (1..total); sent_mbps / received_mbps are the
// process's traffic since its previous PROGRESS line, in megabits per second. A reader
// ignores fields it does not know, so fields can be added without breaking it.
//
// Example:
//   ProgressLine p{.iteration = 20, .total = 100, .loss = 1.25};
//   std::cout << FormatProgressLine(p) << std::endl;
//   std::optional<ProgressLine> back = ParseProgressLine(line);
//
// Stateless and thread-safe.
#ifndef P3_P3_BASE_PROGRESS_H_
#define P3_P3_BASE_PROGRESS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace p3 {

struct ProgressLine {
  int64_t iteration = 0;
  int64_t total = 0;
  double loss = 0;
  std::optional<double> samples_per_second;
  std::optional<double> sent_mbps;
  std::optional<double> received_mbps;
};

// One line, without a newline; optional fields only when set. Loss with 4 decimals,
// rates with 1.
std::string FormatProgressLine(const ProgressLine& progress);

// The line's fields, or nullopt when it is not a PROGRESS line or lacks iteration, total
// or loss (or one of them does not parse). Unknown fields are ignored.
std::optional<ProgressLine> ParseProgressLine(absl::string_view line);

}  // namespace p3

#endif  // P3_P3_BASE_PROGRESS_H_
