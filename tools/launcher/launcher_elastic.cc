// launch_cluster --elastic_control=FILE, and the resume of an elastic run from
// checkpoints (docs/reliability.md, "Elastic membership").
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "p3/base/status_macros.h"
#include "p3/core/checkpoint.h"
#include "p3/core/membership.h"
#include "proto/config.h"
#include "tools/launcher/launcher.h"

namespace p3::tools::launcher {

namespace fs = std::filesystem;

Launcher::Child& Launcher::AddWorkerChild(int rank) {
  Child child;
  child.role = "worker";
  child.index = rank;
  const fs::path out(output_dir_);
  child.log_path = (out / "logs" / (child.name() + ".log")).string();
  child.result_file = (out / "results" / (child.name() + ".json")).string();
  child.records_file = (out / "records" / (child.name() + ".csv")).string();
  if (config_.trace()) child.trace_file = (out / "traces" / (child.name() + ".json")).string();
  children_.push_back(child);
  return children_.back();
}

absl::StatusOr<std::vector<int>> Launcher::ElasticPresentAt(const std::string& dir, uint64_t n) {
  MembershipSchedule schedule(config::MaxWorkers(config_), config_.cluster().workers());
  if (n > 0) {
    // Every server's checkpoint of n holds the same membership (the servers apply the
    // same changes); server 0's is read.
    P3_ASSIGN_OR_RETURN(const ShardCheckpoint saved,
                        ReadLatestCheckpoint((fs::path(dir) / "server_0").string(), n));
    for (const MembershipChange& change : saved.membership) {
      if (change.from_iteration > 0) {
        P3_RETURN_IF_ERROR(schedule.Add(change.from_iteration, change.present));
      }
    }
  }
  for (const MembershipChange& change : schedule.changes()) {
    for (int rank : change.present) elastic_next_rank_ = std::max(elastic_next_rank_, rank + 1);
  }
  return schedule.PresentAt(n);
}

absl::Status Launcher::PrepareElasticResume() {
  const config::CheckpointConfig& checkpoint = config_.checkpoint();
  if (!config_.cluster().has_elastic() || config_.mode() == "local" || !checkpoint.resume() ||
      checkpoint.dir().empty()) {
    return absl::OkStatus();
  }
  // A relative checkpoint.dir is relative to the processes' working folder.
  const std::string dir = fs::path(checkpoint.dir()).is_absolute()
                              ? checkpoint.dir()
                              : (fs::path(options_.working_dir) / checkpoint.dir()).string();
  const int servers = config::ServerProcessCount(config_);
  std::string passed_over;
  const uint64_t n = checkpoint.resume_iteration() > 0
                         ? static_cast<uint64_t>(checkpoint.resume_iteration())
                         : NewestCommonCheckpoint(dir, servers, &passed_over);
  if (!passed_over.empty()) Say(absl::StrCat("checkpoints: ", passed_over));
  if (n == 0) {
    Say("elastic resume: no checkpoint common to all servers; a fresh start");
    return absl::OkStatus();
  }
  P3_ASSIGN_OR_RETURN(const std::vector<int> present, ElasticPresentAt(dir, n));
  children_.erase(std::remove_if(children_.begin(), children_.end(),
                                 [&present](const Child& child) {
                                   return child.role == "worker" &&
                                          std::find(present.begin(), present.end(),
                                                    child.index) == present.end();
                                 }),
                  children_.end());
  for (int rank : present) {
    if (rank >= config_.cluster().workers()) AddWorkerChild(rank);  // ranks stay in order
  }
  resume_iteration_ = static_cast<int64_t>(n);
  Say(absl::StrCat("elastic resume from the checkpoints of iteration ", n,
                   ": starting the ranks present then, ", DescribeRanks(present)));
  return absl::OkStatus();
}

absl::Status Launcher::PollElasticControl() {
  if (options_.elastic_control.empty() || !config_.cluster().has_elastic()) {
    return absl::OkStatus();
  }
  std::ifstream in(options_.elastic_control, std::ios::binary);
  if (!in) return absl::OkStatus();  // not written yet
  in.seekg(elastic_control_offset_);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return absl::OkStatus();  // a line still being written
  text.resize(end + 1);
  elastic_control_offset_ += static_cast<int64_t>(text.size());
  const std::string requests = (fs::path(output_dir_) / "membership_requests").string();
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int rank = -1;
    if (words.size() == 2 && words[0] == "remove" && absl::SimpleAtoi(words[1], &rank)) {
      std::ofstream out(requests, std::ios::app);
      out << "leave " << rank << "\n";
      Say(absl::StrCat("elastic control: asked worker ", rank, " to leave"));
      continue;
    }
    if (words.size() != 1 || words[0] != "add") {
      Say(absl::StrCat("elastic control: ignored \"", line, "\" (not `add` or `remove R`)"));
      continue;
    }
    // The lowest rank never started: one above the highest worker so far.
    int next = elastic_next_rank_;
    for (const Child& child : children_) {
      if (child.role == "worker") next = std::max(next, child.index + 1);
    }
    if (next >= config::MaxWorkers(config_)) {
      Say(absl::StrCat("elastic control: ignored `add`: cluster.elastic.max_workers = ",
                       config::MaxWorkers(config_), " ranks started already"));
      continue;
    }
    AddWorkerChild(next);
    std::vector<std::string> argv = WorkerArgv(children_.back(), /*rejoin=*/false);
    argv.push_back("--elastic_join");
    P3_RETURN_IF_ERROR(StartProcess(children_.back(), std::move(argv)));
    supervisor_->WatchFile(children_.back().log_path);
    worker_logs_.emplace_back(children_.back().log_path);
    worker_iterations_.push_back(0);
    Say(absl::StrCat("elastic control: started worker ", next, " (--elastic_join)"));
  }
  return absl::OkStatus();
}

}  // namespace p3::tools::launcher
