#include "tools/launcher/backends.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "p3/base/file_util.h"
#include "p3/base/status_macros.h"
#include "proto/config.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

fs::path AbsoluteOutputDir(const config::ExperimentConfig& config, const std::string& working_dir) {
  fs::path out(config.output_dir());
  if (out.is_relative()) out = fs::path(working_dir) / out;
  return out.lexically_normal();
}

absl::Status WriteFile(const std::string& path, const std::string& contents, bool executable) {
  P3_RETURN_IF_ERROR(WriteFileAtomically(path, contents));
  if (executable && chmod(path.c_str(), 0755) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("chmod ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> FetchArchiveArgv(const std::vector<std::string>& ssh_command,
                                          const Host& host, const std::string& remote_dir,
                                          const std::vector<std::string>& relative_paths) {
  std::vector<std::string> tar = {"tar", "-C", remote_dir, "--ignore-failed-read", "-cf", "-"};
  tar.insert(tar.end(), relative_paths.begin(), relative_paths.end());
  std::vector<std::string> ssh = ssh_command;
  ssh.insert(ssh.end(), {"-o", "BatchMode=yes", host.destination, ShellCommand(tar)});
  return ssh;
}

std::string ResolvedConfigText(const config::ExperimentConfig& config,
                               const std::string& config_source,
                               const std::vector<std::string>& overrides,
                               const std::string& purpose) {
  std::string text =
      absl::StrCat("# Resolved experiment config written by launch_cluster ", purpose,
                   ": defaults filled, overrides applied.\n# Source: ", config_source, "\n");
  for (const std::string& override_text : overrides) {
    absl::StrAppend(&text, "# --set=", override_text, "\n");
  }
  absl::StrAppend(&text, config::ConfigToText(config));
  return text;
}

absl::Status GenerateSlurm(config::ExperimentConfig config, const SlurmJobOptions& options) {
  const fs::path out = AbsoluteOutputDir(config, options.working_dir);
  config.set_output_dir(out.string());
  absl::StatusOr<std::string> script = ReadFile(options.task_script);
  if (!script.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slurm_task_script: ", script.status().message()));
  }
  // logs/ must exist before the job starts: slurmd opens the batch script's
  // "#SBATCH --output=<out>/logs/slurm-%j.out" before running it, and a missing folder
  // ends the job at once ("Could not open stdout file"). The other folders are created
  // again by the script; making them here shows a permission problem before submitting.
  for (const char* sub : {"slurm", "logs", "ports", "results", "records"}) {
    std::error_code error;
    fs::create_directories(out / sub, error);
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot create ", (out / sub).string(), ": ", error.message()));
    }
  }
  SlurmOptions slurm;
  slurm.server_binary = options.server_binary;
  slurm.worker_binary = options.worker_binary;
  slurm.launcher = options.launcher;
  slurm.task_script = (out / "slurm" / "p3_slurm_task.sh").string();
  slurm.output_dir = out.string();
  slurm.partition = options.partition;
  slurm.time_limit = options.time_limit;
  slurm.max_restarts = options.max_restarts;
  slurm.environment = options.environment;
  const std::string config_path = (out / "config.textproto").string();
  const std::string batch = (out / "slurm" / "p3.sbatch").string();
  P3_RETURN_IF_ERROR(WriteFile(
      config_path,
      ResolvedConfigText(config, options.config_source, options.overrides, "for Slurm"), false));
  P3_RETURN_IF_ERROR(WriteFile(slurm.task_script, *script, true));
  P3_RETURN_IF_ERROR(WriteFile(batch, SlurmBatchScript(config, slurm), true));
  *options.out << "[p3] wrote " << batch << " (with " << slurm.task_script << " and " << config_path
               << ")\n"
               << "[p3] " << out.string()
               << " and the binaries must be reachable at the same paths on every node "
                  "(a shared file system)\n"
               << "[p3] submit with: sbatch " << batch << "\n"
               << "[p3] the job's output: " << out.string()
               << "/logs/slurm-<job id>.out; each process's: " << out.string()
               << "/logs/<role>_<i>.log" << std::endl;
  return absl::OkStatus();
}

absl::Status GenerateKubernetes(config::ExperimentConfig config,
                                const KubernetesJobOptions& options) {
  const fs::path out = AbsoluteOutputDir(config, options.working_dir);
  // Inside the pods every process writes under the mounted output volume.
  config.set_output_dir("/var/p3/out");
  KubernetesOptions kube;
  kube.image = options.image;
  kube.kube_namespace = options.kube_namespace;
  kube.server_binary = options.binary_dir + "/p3_server";
  kube.worker_binary = options.binary_dir + "/p3_worker";
  if (options.server_port > 0) kube.server_port = options.server_port;
  kube.output_claim = options.output_claim;
  kube.max_restarts = options.max_restarts;
  kube.environment = options.environment;
  const config::CheckpointConfig& checkpoint = config.checkpoint();
  if (options.max_restarts > 0 && !checkpoint.dir().empty() && checkpoint.every() > 0) {
    // The StatefulSet restarts a failed server with the same command: it must find the
    // checkpoints of every server and pick the newest they all have.
    kube.checkpoint_claim =
        options.checkpoint_claim.empty() ? options.output_claim : options.checkpoint_claim;
    if (kube.checkpoint_claim.empty()) {
      return absl::InvalidArgumentError(
          "--max_restarts with checkpoints (checkpoint.dir, checkpoint.every) restarts the "
          "servers from the checkpoints of all of them, which must be on one volume every "
          "server pod mounts: give a ReadWriteMany PersistentVolumeClaim with "
          "--kube_checkpoint_claim (or --kube_output_claim)");
    }
    config.mutable_checkpoint()->set_dir(kKubeCheckpointDir);
    config.mutable_checkpoint()->set_resume(true);
    config.mutable_checkpoint()->set_resume_iteration(config::kResumeNewestCommon);
  }
  std::error_code error;
  fs::create_directories(out / "kubernetes", error);  // A failure shows in the write below.
  const std::string path = (out / "kubernetes" / "p3.yaml").string();
  P3_RETURN_IF_ERROR(WriteFileAtomically(
      path, KubernetesManifests(config,
                                ResolvedConfigText(config, options.config_source, options.overrides,
                                                   "for Kubernetes"),
                                kube)));
  const std::string job = absl::StrCat("p3-", KubernetesName(config.name()), "-worker");
  *options.out << "[p3] wrote " << path << "\n"
               << "[p3] run:     kubectl apply -f " << path << "\n"
               << "[p3] wait:    kubectl wait --for=condition=complete --timeout=24h job/" << job
               << "\n"
               << "[p3] progress: kubectl logs -f job/" << job << "   (rank 0's pod)\n"
               << "[p3] clean up: kubectl delete -f " << path << std::endl;
  return absl::OkStatus();
}

}  // namespace p3::tools::launcher
