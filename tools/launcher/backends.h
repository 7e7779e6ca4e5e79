// The launcher's multi-host back ends (docs/multihost.md), on top of tools/launcher/multihost.h:
// the ssh command that copies a host's files back (--hosts with --remote_output_dir),
// and the files written instead of running: a Slurm batch script (--slurm) and
// Kubernetes manifests (--kubernetes). Everything arrives in options structs; nothing
// here reads flags or the environment.
//
// Example:
//   SlurmJobOptions slurm;
//   slurm.working_dir = "/home/me/p3";
//   slurm.config_source = "/home/me/p3/configs/local.textproto";
//   slurm.server_binary = "/opt/p3/p3_server";
//   slurm.worker_binary = "/opt/p3/p3_worker";
//   slurm.launcher = "/opt/p3/launch_cluster";
//   slurm.task_script = "/home/me/p3/tools/p3_slurm_task.sh";
//   slurm.partition = "cpu";
//   absl::Status written = GenerateSlurm(config, slurm);
//   // <output_dir>/slurm/p3.sbatch, <output_dir>/slurm/p3_slurm_task.sh and
//   // <output_dir>/config.textproto; "submit with: sbatch ..." on *slurm.out.
//
// Stateless functions; thread-compatible (they write files).
#ifndef P3_TOOLS_LAUNCHER_BACKENDS_H_
#define P3_TOOLS_LAUNCHER_BACKENDS_H_

#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/config.pb.h"
#include "tools/launcher/multihost.h"

namespace p3::tools::launcher {

// The ssh argv that writes to its stdout a tar archive of `relative_paths` (relative to
// `remote_dir` on `host`); files missing there are skipped (tar --ignore-failed-read).
std::vector<std::string> FetchArchiveArgv(const std::vector<std::string>& ssh_command,
                                          const Host& host, const std::string& remote_dir,
                                          const std::vector<std::string>& relative_paths);

// The resolved config as the launcher writes it for a back end, with a header naming its
// source and the overrides: "# Resolved experiment config written by launch_cluster
// <purpose>: ...".
std::string ResolvedConfigText(const config::ExperimentConfig& config,
                               const std::string& config_source,
                               const std::vector<std::string>& overrides,
                               const std::string& purpose);

struct SlurmJobOptions {
  // Folder a relative config output_dir is relative to. Required.
  std::string working_dir;
  // The config file and --set overrides, for the header of the written config.
  std::string config_source;
  std::vector<std::string> overrides;
  // Absolute paths of the binaries, the same on every node. Required.
  std::string server_binary;
  std::string worker_binary;
  // launch_cluster itself, for the batch script's final --collect. Default: "launch_cluster".
  std::string launcher = "launch_cluster";
  // The per-task script to copy next to the batch script. Required.
  std::string task_script;
  // sbatch --partition and --time; empty: not given. Default: empty.
  std::string partition;
  std::string time_limit;
  // Restarts of a failed worker within its task, with --rejoin (launch_cluster
  // --max_restarts; per worker task, unlike the local launcher's total). Default: 0.
  int max_restarts = 0;
  // Exported by the batch script for every task (SlurmOptions::environment); launch_cluster:
  // ForwardedEnvironment(). Default: none.
  Environment environment;
  // Where to say what was written. Default: std::cout. Not owned.
  std::ostream* out = &std::cout;
};

// --slurm: writes <output_dir>/slurm/p3.sbatch (executable), the task script beside it
// and <output_dir>/config.textproto (output_dir made absolute). InvalidArgument when the
// folder cannot be created or the task script read (nothing written); another error when
// a file cannot be written.
absl::Status GenerateSlurm(config::ExperimentConfig config, const SlurmJobOptions& options);

struct KubernetesJobOptions {
  // Folder a relative config output_dir is relative to. Required.
  std::string working_dir;
  // The config file and --set overrides, for the header of the config in the ConfigMap.
  std::string config_source;
  std::vector<std::string> overrides;
  // Container image. Default: "p3:latest".
  std::string image = "p3:latest";
  // Namespace of every object; empty: none written. Default: empty.
  std::string kube_namespace;
  // Folder of p3_server and p3_worker inside the image. Default: "/opt/p3".
  std::string binary_dir = "/opt/p3";
  // The servers' port; 0: KubernetesOptions' default (50051). Default: 0.
  int server_port = 0;
  // PersistentVolumeClaim mounted at /var/p3/out; empty: an emptyDir. Default: empty.
  std::string output_claim;
  // > 0: failed worker containers restart in their pods and rejoin (the Job's
  // backoffLimit; launch_cluster --max_restarts). Default: 0.
  int max_restarts = 0;
  // With max_restarts > 0 and checkpoints on (checkpoint.dir, checkpoint.every): the
  // ReadWriteMany PersistentVolumeClaim for the servers' checkpoints; empty: output_claim.
  // One of the two is then required. Default: empty.
  std::string checkpoint_claim;
  // Set in every container (KubernetesOptions::environment); launch_cluster:
  // ForwardedEnvironment(). Default: none.
  Environment environment;
  // Where to say what was written and the kubectl commands. Default: std::cout. Not owned.
  std::ostream* out = &std::cout;
};

// --kubernetes: writes <output_dir>/kubernetes/p3.yaml; inside the pods output_dir is
// /var/p3/out.
absl::Status GenerateKubernetes(config::ExperimentConfig config,
                                const KubernetesJobOptions& options);

}  // namespace p3::tools::launcher

#endif  // P3_TOOLS_LAUNCHER_BACKENDS_H_
