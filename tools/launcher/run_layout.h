// The output folder of a run (docs/launcher.md, "Output files"): which processes a config
// starts, on which machine, and the files each one writes.
//
//   <output_dir>/config.textproto  summary.json  trace.json
//   logs/<role>_<i>.log  ports/server_<i>.port  results/worker_<r>.json
//   records/worker_<r>.csv  traces/<role>_<i>.json (trace: true)
//
// Example:
//   RunLayoutOptions options;
//   options.working_dir = "/home/me/p3";   // for a relative output_dir
//   absl::StatusOr<RunLayout> layout = MakeRunLayout(config, options);
//   for (const ProcessFiles& p : layout->processes) std::cout << p.name() << " " << p.log_path;
//
// Stateless; thread-compatible (it creates folders and removes stale files).
#ifndef P3_TOOLS_LAUNCHER_RUN_LAYOUT_H_
#define P3_TOOLS_LAUNCHER_RUN_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"

namespace p3::tools::launcher {

// One server or worker process and its files (absolute paths; empty when not written).
struct ProcessFiles {
  std::string role;  // "server" or "worker".
  int index = 0;     // Server index or worker rank.
  int machine = 0;   // Emulated machine or host index (placement); 0 on one machine.
  std::string log_path;
  std::string port_file;     // Servers.
  std::string result_file;   // Workers.
  std::string records_file;  // Workers.
  std::string trace_file;    // With trace: true.

  // "server_0", "worker_1".
  std::string name() const;
};

struct RunLayoutOptions {
  // Folder a relative output_dir is relative to. Required.
  std::string working_dir;
  // Machines the processes are placed on (config::WorkerMachine / ServerMachine).
  // Default: 1.
  int machines = 1;
  // Remove summary.json, trace.json and the processes' port, result, record and trace
  // files of an earlier run, so that nothing stale is taken for this run's. Default: true.
  bool clear_stale = true;
};

struct RunLayout {
  std::string output_dir;
  std::string config_path;   // <output_dir>/config.textproto
  std::string summary_path;  // <output_dir>/summary.json
  std::string trace_path;    // <output_dir>/trace.json
  // Servers by index, then workers by rank.
  std::vector<ProcessFiles> processes;
};

// Creates the output folder and its subfolders (traces/ only with trace: true) and lists
// the processes. PermissionDenied "output_dir: cannot create <folder>: <reason>".
absl::StatusOr<RunLayout> MakeRunLayout(const config::ExperimentConfig& config,
                                        const RunLayoutOptions& options);

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_RUN_LAYOUT_H_
