// What the launcher prints while a run goes on: its "[p3] ..." messages and rank 0's
// progress, read from the PROGRESS lines (p3/base/progress.h) of rank 0's log, with every
// worker's latest iteration (from their logs) at the end.
//
// On a terminal the progress is one line redrawn in place (at most once a second
// without news); otherwise one plain line per PROGRESS line of rank 0, for logs and pipes:
//   [p3] iter 120/938  loss 0.612  1835 samples/s  sent 812 Mbit/s  received 790 Mbit/s  elapsed
//   25s  workers 120 118
//
// Example:
//   LogFollower follower("/out/logs/worker_0.log");
//   ProgressDisplay display(ProgressDisplay::Options{});   // plain lines to std::cout
//   display.Say("started 2 worker(s)");                    // "[p3] started 2 worker(s)"
//   display.Show(follower.ReadNewProgress(), absl::Now(), start_time);
//   display.Finish();
//
// Thread-compatible: one thread prints.
#ifndef P3_TOOLS_LAUNCHER_PROGRESS_DISPLAY_H_
#define P3_TOOLS_LAUNCHER_PROGRESS_DISPLAY_H_

#include <cstdint>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "p3/base/progress.h"

namespace p3::tools::launcher {

// Follows a growing log file and returns its new PROGRESS lines.
class LogFollower {
 public:
  explicit LogFollower(std::string path) : path_(std::move(path)) {}

  // The PROGRESS lines completed since the previous call (a line still being written is
  // kept until its newline arrives); other lines are skipped. None while the file does
  // not exist.
  std::vector<ProgressLine> ReadNewProgress();

 private:
  std::string path_;
  int64_t offset_ = 0;
  std::string partial_line_;
};

class ProgressDisplay {
 public:
  struct Options {
    // Redraw one line in place (stdout is a terminal) instead of printing lines.
    // Default: false.
    bool live = false;
    // Where to print. Default: std::cout. Not owned.
    std::ostream* out = &std::cout;
  };

  explicit ProgressDisplay(const Options& options) : options_(options) {}

  // Prints "[p3] <line>" (clearing a live progress line first).
  void Say(const std::string& line);

  // Shows `new_progress` (rank 0's lines since the last call). `start` is when the run
  // began (for "elapsed"); `now` the current time. Live: redraws the latest line, or
  // every second a "waiting" line or the elapsed time. Plain: one line per entry.
  // `worker_iterations`: each worker's latest iteration by rank (0: none yet), shown
  // when there are two or more.
  void Show(const std::vector<ProgressLine>& new_progress, absl::Time now, absl::Time start,
            const std::vector<int64_t>& worker_iterations = {});

  // Ends a live progress line with a newline, leaving it on the terminal.
  void Finish();
  // Erases a live progress line.
  void Clear();

 private:
  const Options options_;
  std::optional<ProgressLine> latest_;
  bool line_shown_ = false;
  absl::Time last_draw_ = absl::InfinitePast();
};

// "812 Mbit/s", "2.41 Gbit/s".
std::string FormatMbps(double mbps);

// "[p3] iter 4/12  loss 0.5  6400 samples/s  sent 250 Mbit/s  received 125 Mbit/s  elapsed 3s";
// the rate and traffic parts only when the line has them; then, with two or more
// workers, FormatWorkerIterations.
std::string FormatProgress(const ProgressLine& progress, absl::Duration elapsed,
                           const std::vector<int64_t>& worker_iterations = {});

// Every worker's latest iteration, by rank: "  workers 12 11 12" (up to 8 workers), or
// "  workers 10..12, behind: rank 3 at 10" (more); "" with fewer than two.
std::string FormatWorkerIterations(const std::vector<int64_t>& worker_iterations);

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_PROGRESS_DISPLAY_H_
