#include "p3/core/stall_report.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3 {

std::string ListIds(const std::vector<int>& ids, size_t shown) {
  std::vector<int> head(ids.begin(), ids.begin() + std::min(shown, ids.size()));
  std::string text = absl::StrJoin(head, ", ");
  if (ids.size() > shown) absl::StrAppend(&text, ", ... (", ids.size(), " in all)");
  return text;
}

GradientStallWatch::GradientStallWatch(int server_index, absl::Duration after)
    : server_index_(server_index), after_(after) {}

std::optional<StallReport> GradientStallWatch::Observe(const std::vector<SliceWait>& waits,
                                                       absl::Time now) {
  std::map<int, std::pair<uint64_t, absl::Time>> since;
  // Stalled slices by missing rank, and the report's figures.
  std::map<int, std::vector<int>> by_rank;
  StallReport report;
  // Slices a version ahead wait for an iteration that cannot start before the oldest one
  // ends: only the oldest iteration's missing gradients hold the run up.
  report.iteration = UINT64_MAX;
  for (const SliceWait& w : waits) {
    if (!w.missing_ranks.empty()) report.iteration = std::min(report.iteration, w.iteration);
  }
  for (const SliceWait& w : waits) {
    if (w.missing_ranks.empty()) continue;
    auto seen = since_.find(w.slice_id);
    const absl::Time start =
        seen != since_.end() && seen->second.first == w.iteration ? seen->second.second : now;
    since[w.slice_id] = {w.iteration, start};
    if (now - start < after_ || w.iteration != report.iteration) continue;
    report.waited = std::max(report.waited, now - start);
    for (int r : w.missing_ranks) by_rank[r].push_back(w.slice_id);
  }
  since_ = std::move(since);
  if (by_rank.empty() || now - last_report_ < after_) return std::nullopt;
  last_report_ = now;
  std::vector<std::string> parts;
  for (auto& [rank, slices] : by_rank) {
    std::sort(slices.begin(), slices.end());
    report.missing_ranks.push_back(rank);
    parts.push_back(absl::StrCat("worker ", rank, " (", slices.size(),
                                 slices.size() == 1 ? " slice: " : " slices: ", ListIds(slices),
                                 ")"));
  }
  report.text = absl::StrCat("[stall] server ", server_index_, ": waited ",
                             absl::FormatDuration(absl::Trunc(report.waited, absl::Milliseconds(100))),
                             " for the gradients of iteration ", report.iteration, ": ",
                             absl::StrJoin(parts, "; "));
  return report;
}

std::string DescribeValuesOwed(const std::vector<int>& missing, const SlicePlan& plan) {
  std::map<int, std::vector<int>> by_server;
  for (int id : missing) {
    if (id >= 0 && id < static_cast<int>(plan.slices().size())) {
      by_server[plan.slices()[id].server].push_back(id);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [server, ids] : by_server) {
    parts.push_back(absl::StrCat("server ", server, "'s values of ", ids.size(),
                                 ids.size() == 1 ? " slice (" : " slices (", ListIds(ids), ")"));
  }
  return absl::StrJoin(parts, "; ");
}

std::string DescribeValueWait(int rank, absl::Duration waited, uint64_t version,
                              const std::string& what, const std::vector<int>& missing,
                              const SlicePlan& plan) {
  const std::string owed = DescribeValuesOwed(missing, plan);
  return absl::StrCat("[stall] worker ", rank, ": waited ",
                      absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(100))),
                      " for version ", version, " of ", what, ": ",
                      owed.empty() ? "nothing missing any more" : owed);
}

void StallHints::Note(int server, uint64_t iteration, std::vector<int> missing_ranks) {
  absl::MutexLock lock(&mu_);
  latest_[server] = {iteration, std::move(missing_ranks)};
}

std::string StallHints::Describe(uint64_t iteration) const {
  std::set<int> ranks;
  std::vector<std::string> servers;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [server, hint] : latest_) {
      if (hint.first != iteration || hint.second.empty()) continue;
      ranks.insert(hint.second.begin(), hint.second.end());
      servers.push_back(absl::StrCat("server ", server));
    }
  }
  if (servers.empty()) return "";
  return absl::StrCat("the servers wait for the gradients of iteration ", iteration,
                      " from worker", ranks.size() == 1 ? " " : "s ",
                      ListIds(std::vector<int>(ranks.begin(), ranks.end())), " (",
                      absl::StrJoin(servers, ", "), servers.size() == 1 ? " says" : " say", " so)");
}

}  // namespace p3
