#include "tools/launcher/run_layout.h"

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/config.h"

namespace p3::tools::launcher {

namespace fs = std::filesystem;

std::string ProcessFiles::name() const { return absl::StrCat(role, "_", index); }

absl::StatusOr<RunLayout> MakeRunLayout(const config::ExperimentConfig& config,
                                        const RunLayoutOptions& options) {
  fs::path out(config.output_dir());
  if (out.is_relative()) out = fs::path(options.working_dir) / out;
  out = out.lexically_normal();
  RunLayout layout;
  layout.output_dir = out.string();
  std::error_code error;
  for (const char* sub : {"", "logs", "ports", "results", "records", "traces"}) {
    if (std::string(sub) == "traces" && !config.trace()) continue;
    fs::create_directories(out / sub, error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("output_dir: cannot create ", (out / sub).string(), ": ", error.message()));
    }
  }
  layout.config_path = (out / "config.textproto").string();
  layout.summary_path = (out / "summary.json").string();
  layout.trace_path = (out / "trace.json").string();
  const bool clear = options.clear_stale;
  if (clear) {
    fs::remove(layout.summary_path, error);
    fs::remove(layout.trace_path, error);
  }
  auto add = [&](const std::string& role, int index, int machine) -> ProcessFiles& {
    ProcessFiles files;
    files.role = role;
    files.index = index;
    files.machine = machine;
    files.log_path = (out / "logs" / (files.name() + ".log")).string();
    if (config.trace()) {
      files.trace_file = (out / "traces" / (files.name() + ".json")).string();
      if (clear) fs::remove(files.trace_file, error);
    }
    layout.processes.push_back(files);
    return layout.processes.back();
  };
  for (int i = 0; i < config::ServerProcessCount(config); ++i) {
    ProcessFiles& server = add("server", i, config::ServerMachine(config, i, options.machines));
    server.port_file = (out / "ports" / (server.name() + ".port")).string();
    if (clear) fs::remove(server.port_file, error);
  }
  for (int r = 0; r < config::WorkerProcessCount(config); ++r) {
    ProcessFiles& worker = add("worker", r, config::WorkerMachine(config, r, options.machines));
    worker.result_file = (out / "results" / (worker.name() + ".json")).string();
    worker.records_file = (out / "records" / (worker.name() + ".csv")).string();
    if (clear) {
      fs::remove(worker.result_file, error);
      fs::remove(worker.records_file, error);
    }
  }
  return layout;
}

}  // namespace p3::tools::launcher
