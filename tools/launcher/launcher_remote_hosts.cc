// The Launcher's files on other hosts (--hosts with --remote_output_dir, no shared file
// system): the processes' paths there, and copying their results, records, traces and
// rank 0's model back over ssh once they are done.
#include "tools/launcher/launcher.h"

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tools/launcher/backends.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string Launcher::RemotePath(const std::string& local) const {
  if (options_.hosts.empty() || options_.remote_output_dir.empty()) return local;
  absl::string_view rest = local;
  if (!absl::ConsumePrefix(&rest, output_dir_)) return local;
  return absl::StrCat(options_.remote_output_dir, rest);
}

absl::Status Launcher::FetchRemoteFiles() {
  if (options_.hosts.empty() || options_.remote_output_dir.empty()) return absl::OkStatus();
  // One ssh per host: tar the files missing here (results, records, traces) over stdout.
  for (size_t h = 0; h < options_.hosts.size(); ++h) {
    std::vector<std::string> relative;
    for (const Child& child : children_) {
      if (child.host != &options_.hosts[h]) continue;
      for (const std::string& local : {child.result_file, child.records_file, child.trace_file}) {
        std::error_code error;
        if (local.empty() || fs::exists(local, error)) continue;
        relative.push_back(fs::path(local).lexically_relative(output_dir_).string());
      }
    }
    if (relative.empty()) continue;
    const std::string archive = absl::StrCat(output_dir_, "/.fetch_host_", h, ".tar");
    const bool fetched =
        supervisor_->RunQuietly(FetchArchiveArgv(options_.ssh_command, options_.hosts[h],
                                                 options_.remote_output_dir, relative),
                                archive) &&
        supervisor_->RunQuietly({"tar", "-C", output_dir_, "-xf", archive}, "");
    std::error_code error;
    fs::remove(archive, error);
    if (!fetched) {
      // Missing results are reported by ReadResults, missing traces by MergeTraces.
      Say(absl::StrCat("warning: cannot copy the files of host ", options_.hosts[h].destination,
                       " from ", options_.remote_output_dir));
    }
  }
  return absl::OkStatus();
}

void Launcher::FetchRemoteModel() {
  if (options_.hosts.empty() || options_.remote_output_dir.empty()) return;
  for (Child& child : children_) {
    if (child.role != "worker" || child.index != 0 || child.host == nullptr || !child.result ||
        !child.result->contains("model_file") || !child.result->at("model_file").is_string()) {
      continue;
    }
    const std::string remote = child.result->at("model_file").get<std::string>();
    const fs::path local = fs::absolute(fs::path(output_dir_) / "model.pt");
    // A model_file of the user's own stays where rank 0 wrote it.
    if (!absl::EndsWith(remote, RemotePath((fs::path(output_dir_) / "model.pt").string()))) return;
    const std::string archive = absl::StrCat(output_dir_, "/.fetch_model.tar");
    const bool fetched =
        supervisor_->RunQuietly(FetchArchiveArgv(options_.ssh_command, *child.host,
                                                 options_.remote_output_dir, {"model.pt"}),
                                archive) &&
        supervisor_->RunQuietly({"tar", "-C", output_dir_, "-xf", archive}, "");
    std::error_code error;
    fs::remove(archive, error);
    if (fetched && fs::exists(local, error)) {
      (*child.result)["model_file"] = local.string();
    } else {
      Say(absl::StrCat("warning: cannot copy the model from host ", child.host->destination,
                       "; it stays there: ", remote));
    }
  }
}

}  // namespace p3::tools::launcher
