// Running one experiment config on several hosts (docs/multihost.md): the pieces of
// launch_cluster that are pure text — host files, the ssh command lines, the Slurm batch
// script and the Kubernetes manifests — so tests can check them without a cluster.
//
// The one thing here that is not pure text: ForwardedEnvironment() reads this process's
// environment.
//
// Placement is the config's (proto/config.h: WorkerMachine / ServerMachine): with
// placement "colocated", machine (host) i runs worker i and server i.
//
// Example:
//   absl::StatusOr<std::vector<p3::tools::Host>> hosts =
//       p3::tools::ParseHostFile("alice@node1 10.0.0.1\nnode2\n");
//   // (*hosts)[0].destination == "alice@node1", (*hosts)[0].address == "10.0.0.1"
//   // (*hosts)[1].destination == "node2",       (*hosts)[1].address == "node2"
//   std::vector<std::string> argv = p3::tools::SshArgv({"ssh"}, (*hosts)[1], "echo hi");
//   // {"ssh", "-o", "BatchMode=yes", "node2", "--", "sh -c 'echo hi'"}
//
// Thread-compatible; no state.
#ifndef P3_TOOLS_LAUNCHER_MULTIHOST_H_
#define P3_TOOLS_LAUNCHER_MULTIHOST_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"

namespace p3::tools {

// One line of a host file.
struct Host {
  // What ssh connects to: "host", "user@host" or an alias of ~/.ssh/config.
  std::string destination;
  // The address servers on this host bind and workers connect to. Default: the host part
  // of `destination` (after any "user@").
  std::string address;
};

// Parses a host file: one host per line, `<ssh destination> [<address>]`; '#' starts a
// comment; blank lines are skipped. Errors name the line (1-based).
absl::StatusOr<std::vector<Host>> ParseHostFile(absl::string_view text);

// Environment variables: (name, value) pairs, in order. Names are shell variable names.
using Environment = std::vector<std::pair<std::string, std::string>>;

// The variables of the launcher's environment that the processes it starts elsewhere (over
// ssh, as Slurm tasks, in Kubernetes pods) get too, as the launcher has them: none of those
// passes the launcher's environment on. GLIBC_TUNABLES: launch_cluster adds
// glibc.malloc.hugetlb=1 to it unless it names that tunable already, so that its processes
// grow their heaps in huge pages (p3/base/allocator.h, RequestHugePageHeapForChildren).
inline constexpr const char* kForwardedVariables[] = {"GLIBC_TUNABLES"};

// Those of kForwardedVariables that this process's environment sets, with their values
// (an empty value included), in kForwardedVariables' order.
Environment ForwardedEnvironment();

// One `export NAME='value'` line per variable (value quoted by ShellQuote).
std::string ShellExports(const Environment& environment);

// `text` quoted for a POSIX shell: 'text' with every ' written as '\''.
std::string ShellQuote(absl::string_view text);

// The words of `argv` quoted and joined by spaces (a shell command line).
std::string ShellCommand(const std::vector<std::string>& argv);

// The argv that runs the shell script `script` on `host`: `ssh_command` (e.g. {"ssh"} or
// {"ssh", "-F", "cfg"}), `-o BatchMode=yes` (never prompt), the destination, and
// `sh -c '<script>'` (the remote login shell may not be POSIX).
std::vector<std::string> SshArgv(const std::vector<std::string>& ssh_command, const Host& host,
                                 const std::string& script);

// What a process started over ssh needs on its host.
struct RemoteProcess {
  // Folders to create first (mkdir -p).
  std::vector<std::string> directories;
  // Written atomically to `config_path` before the process starts (the resolved config,
  // so that hosts without a shared file system get it too).
  std::string config_text;
  std::string config_path;
  // Where the process runs (cd; falls back to / when missing there).
  std::string working_directory;
  // The process's command line.
  std::vector<std::string> argv;
  // Exported for the process (ssh passes none of the launcher's environment on).
  // Default: none.
  Environment environment;
  // Unique per process; names the temporary config file.
  std::string tag = "p";
};

// The POSIX shell script that prepares `process`'s host and runs it, with its environment
// exported. The process runs in the background while the script reads its stdin (the ssh
// connection); when that ends — the launcher stopped ssh, or died — the script sends the
// process and its children SIGTERM. The script exits with the process's exit status.
std::string RemoteScript(const RemoteProcess& process);

// Kubernetes / DNS-1123 form of an experiment name: lower case, [a-z0-9-], at most 40
// characters, starting and ending with a letter or digit ("My_Run.2" -> "my-run-2").
std::string KubernetesName(absl::string_view name);

struct SlurmOptions {
  // Absolute paths, the same on every node (installed there, or on a shared file system).
  std::string server_binary;
  std::string worker_binary;
  std::string launcher;     // launch_cluster, for the final `--collect`.
  std::string task_script;  // tools/p3_slurm_task.sh (copied to <output_dir>/slurm/).
  // The output folder: absolute, on a file system shared by every node.
  std::string output_dir;
  // sbatch --partition and --time; empty: not given (the cluster's defaults).
  std::string partition;
  std::string time_limit;
  // Restarts of a failed worker, in its task, with --rejoin (the config must have
  // cluster.rejoin_timeout_s > 0). Default: 0.
  int max_restarts = 0;
  // Exported by the batch script before its srun, which passes the script's environment
  // on to the tasks (srun's --export=ALL, its default). Default: none.
  Environment environment;
};
// The config's worker.command, if any, is passed to the task script
// (--worker_command=...), which runs it instead of worker_binary with the P3_*
// environment (tools/launcher/worker_program.h); a restarted one gets P3_REJOIN=1.

// Tasks per node for `config`: the most processes placement puts on one machine.
int SlurmTasksPerNode(const config::ExperimentConfig& config, int machines);

// An sbatch script that runs `config` (the resolved config, at
// <output_dir>/config.textproto) on network.machines (or the default count of) nodes:
// one srun of machines x tasks-per-node tasks, each running the task script, which
// derives its role and rank from SLURM_PROCID (docs/multihost.md), then
// `launch_cluster --collect=<output_dir>` for summary.json and trace.json.
std::string SlurmBatchScript(const config::ExperimentConfig& config, const SlurmOptions& options);

struct KubernetesOptions {
  // Container image holding the binaries. Default: "p3:latest".
  std::string image = "p3:latest";
  // Namespace of every object; empty: none written (kubectl's current namespace).
  std::string kube_namespace;
  // Paths of the binaries inside the image.
  std::string server_binary = "/opt/p3/p3_server";
  std::string worker_binary = "/opt/p3/p3_worker";
  // The port every server listens on. Default: 50051.
  int server_port = 50051;
  // A PersistentVolumeClaim (ReadWriteMany) mounted at /var/p3/out in every pod, to keep
  // results, records and traces; empty: an emptyDir (lost with the pod).
  std::string output_claim;
  // > 0: the worker Job restarts a failed worker container in its pod (restartPolicy
  // OnFailure, backoffLimit max_restarts), and the restarted process rejoins (--rejoin,
  // told by a marker in an emptyDir that survives the container). The config must have
  // cluster.rejoin_timeout_s > 0. Default: 0 (restartPolicy Never, backoffLimit 0).
  int max_restarts = 0;
  // A PersistentVolumeClaim (ReadWriteMany: every server pod mounts it at once) mounted
  // at kKubeCheckpointDir in every server pod, holding checkpoint.dir. Set (with
  // max_restarts > 0) when the servers restart from checkpoints: the config must then
  // have checkpoint.dir = kKubeCheckpointDir, checkpoint.resume and
  // checkpoint.resume_iteration -1, so that every server container, started again by
  // the StatefulSet with the same command, resumes from the newest checkpoint that all
  // servers have. Empty: no checkpoint volume. Default: empty.
  std::string checkpoint_claim;
  // Set in every server and worker container (`env:`). Default: none.
  Environment environment;
};

// Where the servers' checkpoint volume is mounted (KubernetesOptions::checkpoint_claim).
inline constexpr char kKubeCheckpointDir[] = "/var/p3/checkpoints";

// Kubernetes objects for `config` in one multi-document YAML: a ConfigMap with the
// resolved config (`config_text`), a headless Service and a StatefulSet of
// cluster.servers servers (index = pod ordinal), an Indexed Job of cluster.workers
// workers (rank = JOB_COMPLETION_INDEX). With worker.command set, the worker containers
// run it (from the container's P3_WORKER_COMMAND variable, through /bin/sh -c) with the
// P3_* environment (tools/launcher/worker_program.h) instead of worker_binary; a container
// restarted in its pod gets P3_REJOIN=1.
std::string KubernetesManifests(const config::ExperimentConfig& config,
                                const std::string& config_text, const KubernetesOptions& options);

}  // namespace p3::tools

#endif  // P3_TOOLS_LAUNCHER_MULTIHOST_H_
