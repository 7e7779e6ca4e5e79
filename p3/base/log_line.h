// One line of a process's log on stderr, written whole: a single write(2) of the line and
// its newline, so that lines that two threads write at once do not interleave (std::cerr
// is unbuffered and writes each `<<` on its own). The launcher and the tests read these
// logs line by line.
//
// Example:
//   p3::LogLine(absl::StrCat("[stall] worker ", rank, ": ..."));
//
// Thread-safe.
#ifndef P3_P3_BASE_LOG_LINE_H_
#define P3_P3_BASE_LOG_LINE_H_

#include "absl/strings/string_view.h"

namespace p3 {

// Writes `line` and a newline to stderr in one write where the kernel takes it whole (a
// pipe takes up to 4096 bytes whole; a longer line may be split, but is never mixed
// with another line of this process that also goes through LogLine).
void LogLine(absl::string_view line);

}  // namespace p3

#endif  // P3_P3_BASE_LOG_LINE_H_
