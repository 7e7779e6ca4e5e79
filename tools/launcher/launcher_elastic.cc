// launch_cluster --elastic_control=FILE (docs/reliability.md, "Elastic membership").
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "p3/base/status_macros.h"
#include "proto/config.h"
#include "tools/launcher/launcher.h"

namespace p3::tools::launcher {

namespace fs = std::filesystem;

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
    int next = 0;
    for (const Child& child : children_) {
      if (child.role == "worker") next = std::max(next, child.index + 1);
    }
    if (next >= config::MaxWorkers(config_)) {
      Say(absl::StrCat("elastic control: ignored `add`: cluster.elastic.max_workers = ",
                       config::MaxWorkers(config_), " ranks started already"));
      continue;
    }
    Child child;
    child.role = "worker";
    child.index = next;
    const fs::path out(output_dir_);
    child.log_path = (out / "logs" / (child.name() + ".log")).string();
    child.result_file = (out / "results" / (child.name() + ".json")).string();
    child.records_file = (out / "records" / (child.name() + ".csv")).string();
    if (config_.trace()) child.trace_file = (out / "traces" / (child.name() + ".json")).string();
    children_.push_back(child);
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
