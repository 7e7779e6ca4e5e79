// One experiment on a local cluster, or over ssh on several hosts: the launcher's
// orchestration (docs/launcher.md). It writes the resolved config, builds the emulated
// network if the config asks for one, starts the servers and waits for their ports,
// starts the workers, shows rank 0's progress with every worker's iteration, and when every
// process has exited cleanly reads the results, merges the traces and writes summary.json
// (with the straggler). If a process fails, or a termination signal arrives, it stops the
// others and reports the first failure apart from the errors that followed it (also in a
// summary.json with "status": "failed"; not after a signal).
//
// The pieces are separate units: run_layout.h (the output folder), ProcessSupervisor
// (fork/exec, signalfd/inotify loop), ProgressDisplay, summary.h, network_setup.h and
// backends.h. launch_cluster.cc reads the
// flags and fills LauncherOptions. The class's own code is split by concept: launcher.cc
// (Run, CheckNetworkOnly, Collect, the output folder and the network),
// launcher_processes.cc, launcher_restarts.cc, launcher_results.cc and
// launcher_remote_hosts.cc (the private section below is grouped the same way).
//
// Example:
//   LauncherOptions options;
//   options.config_path = "/home/me/p3/configs/local.textproto";
//   options.server_binary = "/home/me/p3/bazel-bin/server/p3_server";
//   options.worker_binary = "/home/me/p3/bazel-bin/worker/p3_worker";
//   options.working_dir = "/home/me/p3";
//   absl::StatusOr<config::ExperimentConfig> config =
//       config::LoadConfig(options.config_path, {});
//   Launcher launcher(options, *config);
//   return launcher.Run();   // the process exit status
//
// Thread-compatible; meant for a single-threaded program (Run() forks, and blocks
// SIGCHLD, SIGINT, SIGTERM and SIGHUP while it runs).
#ifndef P3_TOOLS_LAUNCHER_LAUNCHER_H_
#define P3_TOOLS_LAUNCHER_LAUNCHER_H_

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/config.pb.h"
#include "tools/launcher/process_supervisor.h"
#include "tools/launcher/progress_display.h"
#include "tools/launcher/run_layout.h"
#include "tools/launcher/summary.h"
#include "tools/launcher/multihost.h"
#include "tools/launcher/netem.h"

namespace p3::tools::launcher {

struct LauncherOptions {
  // Absolute paths of the config file (named in the resolved config's header) and of the
  // binaries. Required (the binaries not for Collect()).
  std::string config_path;
  std::string server_binary;
  std::string worker_binary;
  // Folder that a relative config output_dir is relative to. Required.
  std::string working_dir;
  // The --set overrides, in order (listed in the resolved config's header). Default: none.
  std::vector<std::string> overrides;
  // Between SIGTERM and SIGKILL when stopping processes. Default: 5 seconds.
  absl::Duration kill_grace = absl::Seconds(5);
  // Lines of a failed process's log to show. Default: 20.
  int log_tail_lines = 20;
  // Redraw one progress line in place (stdout is a terminal). Default: false.
  bool live_progress = false;
  // Hosts to run on over ssh; empty: this machine. Default: empty.
  std::vector<Host> hosts;
  // The ssh command with --hosts. Default: {"ssh"}.
  std::vector<std::string> ssh_command = {"ssh"};
  // With hosts: exported for every process started over ssh, which passes none of the
  // launcher's environment on (the local processes inherit all of it); launch_cluster:
  // ForwardedEnvironment(). Default: none.
  Environment environment;
  // Servers listen on server_port + index when > 0; 0: OS-chosen, read from port files.
  // Default: 0.
  int server_port = 0;
  // With hosts: the processes' output folder on their hosts; empty: output_dir (a shared
  // file system). Default: empty.
  std::string remote_output_dir;
  // After summary.json, this command with the output folder appended draws the curves
  // (tools/plot_records.py writes <output_dir>/curves.png); its failure, e.g. matplotlib
  // missing, is reported and does not fail the run. Empty: no curves. Default: empty.
  std::vector<std::string> plot_command;
  // Restarts of dead workers allowed over the whole run (torchrun's --max_restarts): a
  // worker that dies is started again with the same rank and --rejoin, appending to its
  // log, and rejoins the servers (the config needs cluster.rejoin_timeout_s > 0;
  // launch_cluster sets it). 0: any failure ends the run. Default: 0.
  int max_restarts = 0;
  // Elastic runs (cluster.elastic): a control file the launcher polls while the workers
  // run (docs/reliability.md, "Elastic membership"). A line `add` starts a worker with
  // the next rank never started and --elastic_join; `remove R` appends `leave R` to the
  // workers' requests file. Default: "" (none).
  std::string elastic_control;
  // What the automatic slice size and credit search found (tools/launcher/tuning.h's
  // TuningJson), for summary.json's "tuning"; null: none. Default: null.
  nlohmann::ordered_json tuning;
};

class Launcher {
 public:
  Launcher(LauncherOptions options, config::ExperimentConfig config);
  // Stops any process still running and removes the emulated network.
  ~Launcher();

  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Runs the experiment; returns the process exit status (0 success, 1 a process failed
  // or a result was malformed, 2 the output folder cannot be made, 128 + signal when
  // interrupted).
  int Run();

  // --check_network: builds the network, measures its links strictly, removes it.
  int CheckNetworkOnly();

  // --collect: summary.json and trace.json from the files a run left in output_dir.
  int Collect();

 private:
  // One server or worker process: its files and what the launcher knows of it.
  struct Child : ProcessFiles {
    std::string ns_path;                           // Network namespace to enter (emulated network).
    const Host* host = nullptr;                    // With --hosts: the host it runs on over ssh.
    int id = -1;                                   // In supervisor_, once started.
    std::optional<int> port;                       // Servers, once published.
    std::optional<nlohmann::ordered_json> result;  // Workers, once read.
    // Collect(): how it ended, from its Slurm exit record (results/<name>.exit.json).
    std::optional<ProcessOutcome> recorded;
    int restarts = 0;                              // Workers: times restarted.
    // Stopped by RestartFromCheckpoints, to be started again once the servers are up:
    // not a failure meanwhile.
    bool awaiting_restart = false;
    // Elastic runs restarted from checkpoints: a worker not present at the checkpoint (it
    // had left, or was added later) is not started again; its end is not a failure.
    bool gone = false;

    // "worker 1", "worker 1 on alice@node2".
    std::string label() const;
  };

  // ---- Processes (launcher_processes.cc): starting, waiting, failures, stopping.
  // The child's process state; null before it started.
  const ProcessState* StateOf(const Child& child) const;
  bool Running(const Child& child) const;
  int PidOf(const Child& child) const;
  std::string ServerAddress(const Child& child) const;
  // `argv`: the binary (or /usr/bin/env for a worker program), then its arguments.
  absl::Status StartProcess(Child& child, std::vector<std::string> argv);
  // A worker's argv: p3_worker with its flags, or worker.command with the P3_*
  // environment (tools/launcher/worker_program.h); `rejoin`: it replaces a dead worker.
  std::vector<std::string> WorkerArgv(const Child& child, bool rejoin) const;
  absl::Status StartServers();
  absl::Status StartWorkers();
  absl::Status WaitForPorts();
  absl::Status WaitForWorkers();
  absl::Status WaitForServers();
  void UpdateProgress();
  absl::Status CheckForFailure();
  absl::Status FailureOf(const Child& child, const std::string& what);
  absl::Status Interrupted() const;
  void StopAll();

  // ---- Restarts under --max_restarts (launcher_restarts.cc).
  // A server died under --max_restarts (in an elastic run, any process): every process
  // starts again from the newest checkpoint all servers have (or from the start when there
  // is none yet), in an elastic run only the ranks present there; without checkpointing,
  // the failure says that this is why the run cannot go on.
  absl::Status RestartFromCheckpoints();
  // Starts again each worker that died while restarts are left (max_restarts) and no
  // server has ended; says which and why.
  absl::Status RestartDeadWorkers();
  // ---- Elastic control (launcher_elastic.cc): applies the control file's new lines.
  absl::Status PollElasticControl();
  // An elastic run with checkpoint.resume (by hand): finds the newest checkpoint N that
  // every server has (or checkpoint.resume_iteration's), pins the servers to it, and
  // makes the workers to start exactly the ranks present at N in the checkpoint's
  // membership (a rank that had left is not started, a rank added later is); nothing
  // changes when there is no such checkpoint (a fresh start).
  absl::Status PrepareElasticResume();
  // The present set at checkpoint `n` (0: the start) of the servers' checkpoints under
  // `dir`, from server 0's membership record; raises elastic_next_rank_ above every rank
  // recorded.
  absl::StatusOr<std::vector<int>> ElasticPresentAt(const std::string& dir, uint64_t n);
  // Appends a worker of rank `rank` with its log, result and records under the output
  // folder (not started).
  Child& AddWorkerChild(int rank);

  // ---- After the run (launcher_results.cc): results, outcomes, summary.json, the table,
  // traces, the failure report, curves.
  // Reads every worker's result file it can; returns the first problem.
  absl::Status ReadResults();
  // Collect(): the Slurm exit records the task script left (tools/p3_slurm_task.sh).
  void ReadExitRecords();
  // How each process ended (servers first), from the supervisor or the exit records.
  std::vector<ProcessOutcome> Outcomes() const;
  // Each worker's timing per iteration from its result and records (those that have both).
  std::vector<WorkerTiming> Timings() const;
  // summary.json; a non-OK `failure`: the run failed ("status": "failed", the error and
  // the first failure).
  absl::Status WriteSummary(const absl::Status& failure = absl::OkStatus());
  // After `failure`: prints the first failure and the follow-on ones, writes summary.json.
  void ReportFailure(const absl::Status& failure);
  void PrintTable();
  void MergeTraces();
  // Runs options_.plot_command on the output folder; says what it drew or why not.
  void DrawCurves();

  // ---- Files on other hosts (launcher_remote_hosts.cc).
  std::string RemotePath(const std::string& local) const;
  absl::Status FetchRemoteFiles();
  // Rank 0's model, written into --remote_output_dir on its host, copied into the output
  // folder; its result then names the local copy (a warning when it cannot be copied).
  void FetchRemoteModel();

  // ---- The output folder and the emulated network (launcher.cc).
  // Lists the processes with their files (removing those of an earlier run when
  // `clear_stale`) and, when `write_config`, writes the resolved config.
  absl::Status PrepareOutputDir(bool clear_stale, bool write_config);
  absl::Status SetUpNetwork();
  absl::Status CheckLinks(bool strict);

  void Say(const std::string& line) { display_.Say(line); }

  const LauncherOptions options_;
  const config::ExperimentConfig config_;
  std::vector<Child> children_;  // Servers first, then workers by rank.
  // Declared before supervisor_: removed after every process in it was stopped.
  std::unique_ptr<EmulatedNetwork> network_;
  std::string congestion_control_;  // of the emulated machines, for summary.json
  bool network_used_ = false;
  std::unique_ptr<ProcessSupervisor> supervisor_;
  std::vector<LinkMeasurement> link_checks_;
  ProgressDisplay display_;
  // Every worker's log, by rank, for the progress line (rank 0's lines are shown).
  std::vector<LogFollower> worker_logs_;
  std::vector<int64_t> worker_iterations_;
  // When StopAll() began; processes ending later were stopped by the launcher.
  absl::Time stop_started_ = absl::InfiniteFuture();
  std::string trace_path_;  // Set once trace.json is written.
  // host:port of every server, in index order (StartWorkers).
  std::vector<std::string> server_addresses_;
  absl::Time start_time_;
  int restarts_used_ = 0;
  // After a server was restarted from checkpoints: the iteration every server resumes
  // from (RestartFromCheckpoints); -1: none.
  int64_t resume_iteration_ = -1;

  std::string output_dir_;
  int64_t elastic_control_offset_ = 0;  // bytes of --elastic_control read
  // The lowest rank an `add` may take: above every rank of a resumed checkpoint's
  // membership (a rank that left does not come back); 0 otherwise.
  int elastic_next_rank_ = 0;
  std::string config_out_;
  std::string config_text_;
  std::string summary_path_;
};

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_LAUNCHER_H_
