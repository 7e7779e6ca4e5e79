// The worker-program contract (config worker.command; docs/worker_api.md, "Run your own
// program with launch_cluster"): launch_cluster runs the command once per worker rank,
// through `/bin/sh -c`, instead of p3_worker, with these environment variables. They
// replace p3_worker's flags one for one, so a program can pass them on to p3_worker, and
// the Python package's p3.init() reads them. The local launcher, the ssh back end, the
// Slurm task script and the Kubernetes manifests all set the same names.
//
// Example:
//   WorkerProgramEnv env;
//   env.rank = 1;
//   env.world_size = 2;
//   env.servers = "10.0.0.1:7070,10.0.0.2:7070";
//   env.config_path = "/runs/x/config.textproto";
//   ...
//   std::vector<std::string> argv = WorkerProgramArgv("python3 train.py", env);
//   // {"/usr/bin/env", "P3_RANK=1", "P3_WORLD_SIZE=2", ..., "P3_REJOIN=0",
//   //  "P3_RUN_DIR=/runs/x", "/bin/sh", "-c", "python3 train.py"}
//
// Stateless; thread-safe.
#ifndef P3_TOOLS_LAUNCHER_WORKER_PROGRAM_H_
#define P3_TOOLS_LAUNCHER_WORKER_PROGRAM_H_

#include <string>
#include <vector>

namespace p3::tools {

// The variables, in the order they are documented and set.
inline constexpr const char* kWorkerProgramVariables[] = {
    "P3_RANK",        "P3_WORLD_SIZE", "P3_SERVERS",     "P3_CONFIG", "P3_RESULT_FILE",
    "P3_RECORDS_FILE", "P3_TRACE_FILE", "P3_REJOIN", "P3_RUN_DIR"};

// One worker's values of the contract.
struct WorkerProgramEnv {
  // This worker's rank, 0 .. world_size - 1 (P3_RANK).
  int rank = 0;
  // The number of workers (P3_WORLD_SIZE).
  int world_size = 1;
  // Comma-separated host:port of the servers, in server-index order (P3_SERVERS).
  std::string servers;
  // The run's resolved config (P3_CONFIG).
  std::string config_path;
  // Where the result JSON may go, in p3_worker's --result_file format (P3_RESULT_FILE).
  std::string result_file;
  // Where the per-iteration records CSV may go (P3_RECORDS_FILE).
  std::string records_file;
  // The trace file; empty: no trace (P3_TRACE_FILE, set to "" then).
  std::string trace_file;
  // Replaces a dead worker of the same rank (P3_REJOIN "1", else "0").
  bool rejoin = false;
  // The run's output folder (P3_RUN_DIR).
  std::string run_dir;
};

// "NAME=value" for every variable of kWorkerProgramVariables, in that order.
std::vector<std::string> WorkerProgramEnvironment(const WorkerProgramEnv& env);

// The argv that runs `command` with the contract's environment added to the inherited
// one: /usr/bin/env NAME=value... /bin/sh -c <command>. An argv rather than a changed
// environment, so that it runs the same in a network namespace and over ssh (where the
// launcher's environment does not reach). A non-empty `working_dir`: the shell first
// changes into it (`cd -- '<dir>' || exit 1`, on a line of its own), so that relative
// paths in the command are relative to it; the program exits 1 when it is missing.
std::vector<std::string> WorkerProgramArgv(const std::string& command,
                                           const WorkerProgramEnv& env,
                                           const std::string& working_dir = "");

}  // namespace p3::tools

#endif  // P3_TOOLS_LAUNCHER_WORKER_PROGRAM_H_
