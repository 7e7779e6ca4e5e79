#include "tools/launcher/progress_display.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace p3::tools::launcher {

std::vector<ProgressLine> LogFollower::ReadNewProgress() {
  std::vector<ProgressLine> lines;
  std::ifstream log(path_, std::ios::binary);
  if (!log) return lines;
  log.seekg(offset_);
  std::string chunk((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  offset_ += static_cast<int64_t>(chunk.size());
  partial_line_ += chunk;
  size_t newline;
  while ((newline = partial_line_.find('\n')) != std::string::npos) {
    std::optional<ProgressLine> progress =
        ParseProgressLine(absl::string_view(partial_line_).substr(0, newline));
    if (progress.has_value()) lines.push_back(*progress);
    partial_line_.erase(0, newline + 1);
  }
  return lines;
}

void ProgressDisplay::Say(const std::string& line) {
  Clear();
  *options_.out << "[p3] " << line << std::endl;
}

void ProgressDisplay::Clear() {
  if (line_shown_) {
    *options_.out << "\r\033[K" << std::flush;
    line_shown_ = false;
  }
}

void ProgressDisplay::Finish() {
  if (line_shown_) {
    *options_.out << "\n" << std::flush;
    line_shown_ = false;
  }
}

void ProgressDisplay::Show(const std::vector<ProgressLine>& new_progress, absl::Time now,
                           absl::Time start, const std::vector<int64_t>& worker_iterations) {
  std::ostream& out = *options_.out;
  if (!options_.live) {
    for (const ProgressLine& progress : new_progress) {
      out << FormatProgress(progress, now - start, worker_iterations) << "\n";
    }
    if (!new_progress.empty()) out << std::flush;
    return;
  }
  if (!new_progress.empty()) latest_ = new_progress.back();
  if (new_progress.empty() && now - last_draw_ < absl::Seconds(1)) return;
  const std::string line =
      latest_.has_value()
          ? FormatProgress(*latest_, now - start, worker_iterations)
          : absl::StrFormat("[p3] waiting for rank 0's first progress line  elapsed %ds%s",
                            absl::ToInt64Seconds(now - start),
                            FormatWorkerIterations(worker_iterations));
  out << "\r\033[K" << line << std::flush;
  line_shown_ = true;
  last_draw_ = now;
}

std::string FormatMbps(double mbps) {
  if (mbps >= 1000) return absl::StrFormat("%.2f Gbit/s", mbps / 1000);
  return absl::StrFormat("%.0f Mbit/s", mbps);
}

std::string FormatWorkerIterations(const std::vector<int64_t>& worker_iterations) {
  if (worker_iterations.size() < 2) return "";
  if (worker_iterations.size() <= 8) {
    return absl::StrCat("  workers ", absl::StrJoin(worker_iterations, " "));
  }
  const auto [low, high] = std::minmax_element(worker_iterations.begin(), worker_iterations.end());
  std::string text = absl::StrCat("  workers ", *low, "..", *high);
  if (*low < *high) {
    absl::StrAppend(&text, ", behind: rank ", low - worker_iterations.begin(), " at ", *low);
  }
  return text;
}

std::string FormatProgress(const ProgressLine& progress, absl::Duration elapsed,
                           const std::vector<int64_t>& worker_iterations) {
  std::string extra;
  if (progress.samples_per_second.has_value()) {
    absl::StrAppendFormat(&extra, "  %.0f samples/s", *progress.samples_per_second);
  }
  if (progress.sent_mbps.has_value()) {
    absl::StrAppend(&extra, "  sent ", FormatMbps(*progress.sent_mbps));
  }
  if (progress.received_mbps.has_value()) {
    absl::StrAppend(&extra, "  received ", FormatMbps(*progress.received_mbps));
  }
  return absl::StrFormat("[p3] iter %d/%d  loss %.4g%s  elapsed %ds%s", progress.iteration,
                         progress.total, progress.loss, extra, absl::ToInt64Seconds(elapsed),
                         FormatWorkerIterations(worker_iterations));
}

}  // namespace p3::tools::launcher
