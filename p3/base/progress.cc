#include "p3/base/progress.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace p3 {

namespace {
constexpr char kPrefix[] = "PROGRESS ";
}  // namespace

std::string FormatProgressLine(const ProgressLine& p) {
  std::string line =
      absl::StrFormat("%siteration=%d total=%d loss=%.4f", kPrefix, p.iteration, p.total, p.loss);
  if (p.samples_per_second) {
    absl::StrAppendFormat(&line, " samples_per_second=%.1f", *p.samples_per_second);
  }
  if (p.sent_mbps) absl::StrAppendFormat(&line, " sent_mbps=%.1f", *p.sent_mbps);
  if (p.received_mbps) absl::StrAppendFormat(&line, " received_mbps=%.1f", *p.received_mbps);
  return line;
}

std::optional<ProgressLine> ParseProgressLine(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, kPrefix)) return std::nullopt;
  ProgressLine p;
  bool iteration = false, total = false, loss = false;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, '=');
    double value = 0;
    if (kv.first == "iteration") {
      iteration = absl::SimpleAtoi(kv.second, &p.iteration);
    } else if (kv.first == "total") {
      total = absl::SimpleAtoi(kv.second, &p.total);
    } else if (kv.first == "loss") {
      loss = absl::SimpleAtod(kv.second, &p.loss);
    } else if (kv.first == "samples_per_second" && absl::SimpleAtod(kv.second, &value)) {
      p.samples_per_second = value;
    } else if (kv.first == "sent_mbps" && absl::SimpleAtod(kv.second, &value)) {
      p.sent_mbps = value;
    } else if (kv.first == "received_mbps" && absl::SimpleAtod(kv.second, &value)) {
      p.received_mbps = value;
    }
  }
  if (!iteration || !total || !loss) return std::nullopt;
  return p;
}

}  // namespace p3
