// launch_cluster: runs one experiment on a local P3 cluster.
//
// Loads and validates an experiment config (proto/config.h), writes the resolved config
// to <output_dir>/config.textproto, starts cluster.servers server processes, waits for
// each to publish its port, starts cluster.workers worker processes, shows rank 0's
// progress, and writes <output_dir>/summary.json when every process has exited cleanly.
// If any process fails, or the launcher gets SIGINT / SIGTERM / SIGHUP, it stops all the
// others (SIGTERM, then SIGKILL after --kill_grace_s) and exits non-zero. Children also
// get SIGKILL from the kernel if the launcher itself dies (PR_SET_PDEATHSIG), so no
// process is left behind.
//
// Example:
//   bazel run //tools:launch_cluster -- --config=configs/local.textproto
//       --set=training.iterations=100 --set=output_dir=out/quick   (one command line)
//
// The process contract (arguments, port files, result files) and the output layout are
// documented in docs/launcher.md. Exit status: 0 success, 1 a process failed or a
// result was malformed, 2 bad command line or config (nothing was started),
// 128+signal when interrupted.
//
// This file is the launcher's main: it reads the flags (only here) into the options of
// the units in tools/launcher/ (launcher.h runs the experiment; backends.h writes the
// Slurm and Kubernetes files; network_setup.h cleans up namespaces) and finds the
// default config and binaries in its runfiles, so that `bazel run //tools:launch_cluster`
// and `bazel-bin/tools/launch_cluster` (from any folder) both work.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "p3/base/allocator.h"
#include "p3/base/file_util.h"
#include "proto/config.h"
#include "proto/config.pb.h"
#include "proto/program.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "tools/launcher/backends.h"
#include "tools/launcher/command_line.h"
#include "tools/launcher/launcher.h"
#include "tools/launcher/membership_replay.h"
#include "tools/launcher/multihost.h"
#include "tools/launcher/network_setup.h"
#include "tools/launcher/tuning.h"

ABSL_FLAG(std::string, config, "configs/default.textproto",
          "Experiment config (text format). A relative path is looked up first in "
          "$BUILD_WORKING_DIRECTORY (where `bazel run` was invoked), then in the current "
          "directory, then in the launcher's runfiles (configs/ comes with it).");
ABSL_FLAG(std::string, server_binary, "server/p3_server",
          "Server executable; relative paths resolve like --config (the default is in the "
          "launcher's runfiles).");
ABSL_FLAG(std::string, worker_binary, "worker/p3_worker",
          "Worker executable; relative paths resolve like --config (the default is in the "
          "launcher's runfiles). Not used when the config sets worker.command (a program of "
          "your own, docs/worker_api.md).");
ABSL_FLAG(std::string, pipeline_binary, "tools/pipeline_train",
          "The pipeline's executable, for a config with mode \"pipeline\" (one process, no "
          "servers); relative paths resolve like --config.");
ABSL_FLAG(bool, plot, true,
          "After summary.json, draw <output_dir>/curves.png (loss and test accuracy per epoch) "
          "with --python and tools/plot_records.py; a missing matplotlib is reported, not an "
          "error.");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "Python with matplotlib (Debian's python3-matplotlib) for --plot.");
ABSL_FLAG(std::string, plot_script, "tools/plot_records.py",
          "The plotting script; relative paths resolve like --config (the default is in the "
          "launcher's runfiles).");
ABSL_FLAG(double, kill_grace_s, 5, "Seconds between SIGTERM and SIGKILL when stopping processes.");
ABSL_FLAG(int, log_tail_lines, 20, "Lines of a failed process's log to print.");
ABSL_FLAG(std::string, elastic_control, "",
          "Elastic runs (cluster.elastic): a control file polled while the workers run; a "
          "line `add` starts a worker with the next rank and --elastic_join, `remove R` asks "
          "rank R to leave (appends `leave R` to <output_dir>/membership_requests, which "
          "rank 0 reads between iterations). docs/reliability.md, \"Elastic membership\".");
ABSL_FLAG(std::string, membership_from, "",
          "Mode local: replay the membership of a finished elastic run, read from its "
          "summary.json (or a worker's results/worker_R.json): sets cluster.workers, "
          "cluster.elastic.max_workers and cluster.elastic.change, so that the run trains "
          "the same sequence of global batches. docs/reliability.md, \"Elastic membership\".");
ABSL_FLAG(int, max_restarts, 0,
          "Restarts of dead workers allowed over the whole run (torchrun's name): a worker "
          "that dies is started again with the same rank and rejoins the servers, which wait "
          "cluster.rejoin_timeout_s for it (set to cluster.peer_timeout_s when 0). 0: a dead "
          "worker ends the run. With --slurm: restarts per worker task; with --kubernetes: "
          "the worker Job's backoffLimit (containers restart in their pods). With "
          "cluster.elastic (needs checkpoints): a dead server or worker restarts every "
          "process from the newest common checkpoint, with the ranks present there.");
ABSL_FLAG(
    bool, check_network, false,
    "Set up the config's emulated network (network.bandwidth_gbps > 0), measure every "
    "machine's link in both directions, print measured vs configured Gbit/s, remove the "
    "network and exit (0: no link above 105% of its rate; a slower one is a warning). Needs root.");
ABSL_FLAG(bool, cleanup_network, false,
          "Remove the network namespaces left by launchers that no longer run (e.g. killed "
          "with SIGKILL), then exit. Needs root.");
ABSL_FLAG(std::string, hosts, "",
          "Host file: run the processes over ssh on these hosts, one per line "
          "`<ssh destination> [<address>]`; machine i of the placement is line i "
          "(docs/multihost.md).");
ABSL_FLAG(std::string, ssh, "ssh",
          "The ssh command used with --hosts, split at spaces, e.g. \"ssh -F my_ssh_config\".");
ABSL_FLAG(int, server_port, 0,
          "Servers listen on this port plus their index instead of an OS-chosen port "
          "(--hosts without a shared file system; default for --kubernetes: 50051).");
ABSL_FLAG(std::string, remote_output_dir, "",
          "With --hosts: the folder the processes write to on their hosts, when it is not "
          "the output folder on a shared file system; result, record and trace files are "
          "fetched with ssh afterwards. Needs --server_port.");
ABSL_FLAG(bool, slurm, false,
          "Do not run: write <output_dir>/slurm/p3.sbatch (and the task script and config "
          "next to it) for `sbatch`, then exit. output_dir must be on a shared file system.");
ABSL_FLAG(std::string, slurm_partition, "", "sbatch --partition for --slurm.");
ABSL_FLAG(std::string, slurm_time, "", "sbatch --time for --slurm, e.g. 02:00:00.");
ABSL_FLAG(std::string, slurm_task_script, "tools/p3_slurm_task.sh",
          "The per-task script --slurm copies next to the batch script; relative paths "
          "resolve like --config.");
ABSL_FLAG(bool, kubernetes, false,
          "Do not run: write <output_dir>/kubernetes/p3.yaml (ConfigMap, headless Service, "
          "server StatefulSet, worker Indexed Job) for `kubectl apply -f`, then exit.");
ABSL_FLAG(std::string, kube_image, "p3:latest", "Container image for --kubernetes.");
ABSL_FLAG(std::string, kube_namespace, "", "Namespace for --kubernetes (default: none given).");
ABSL_FLAG(std::string, kube_binary_dir, "/opt/p3",
          "Folder of p3_server and p3_worker inside the image, for --kubernetes.");
ABSL_FLAG(std::string, kube_output_claim, "",
          "PersistentVolumeClaim mounted at /var/p3/out in every pod, for --kubernetes "
          "(default: an emptyDir, lost with the pod).");
ABSL_FLAG(std::string, kube_checkpoint_claim, "",
          "ReadWriteMany PersistentVolumeClaim for the servers' checkpoints, mounted in every "
          "server pod, for --kubernetes with --max_restarts and checkpoints: a failed server "
          "restarts from the newest checkpoint all servers have (default: "
          "--kube_output_claim).");
ABSL_FLAG(bool, tune_only, false,
          "Do not run: print what a run of this config would choose for an automatic "
          "scheduling.slice_params / credit_bytes (the simulator's table, the choice, and "
          "summary.json's \"tuning\" as one JSON line), then exit.");
ABSL_FLAG(std::string, collect, "",
          "Do not run: read the results a run left in this output folder (its "
          "config.textproto, results/, traces/), write summary.json and trace.json, print the "
          "table. For runs started by Slurm or by hand.");

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;
using bazel::tools::cpp::runfiles::Runfiles;

constexpr char kUsage[] =
    "Runs one experiment on a local P3 cluster.\n"
    "\n"
    "  bazel run //tools:launch_cluster -- [--config=PATH] [--set=field.path=value ...]\n"
    "\n"
    "--set overrides one config field and may be repeated; later ones win, e.g.\n"
    "  --set=training.batch_size=64 --set=mode=baseline --set=optimizer.lr=0.01\n"
    "See docs/launcher.md and docs/config.md.";

// The path of this executable, for the Slurm batch script's --collect.
std::string SelfPath() {
  char self[4096] = {};
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  return length > 0 ? std::string(self, length) : "launch_cluster";
}

int Main(int argc, char** argv) {
  // The search of an automatic slice size and credit runs the simulator in this process.
  Program program("launch_cluster", argc, argv,
                  {.usage = kUsage, .skip_lock_order_checks = true, .config_overrides = true});
  if (absl::Status none = program.NoArguments(); !none.ok()) return program.Fail(2, none.message());
  // Every process started from here on (workers, servers) grows its heap in huge pages
  // unless GLIBC_TUNABLES already says otherwise (p3/base/allocator.h).
  if (absl::Status huge = RequestHugePageHeapForChildren(); !huge.ok()) {
    return program.Fail(1, huge.message());
  }
  const std::vector<std::string>& overrides = program.overrides();
  if (absl::GetFlag(FLAGS_cleanup_network)) return CleanupStaleNetworks();

  // Relative paths: where `bazel run` was invoked (BUILD_WORKING_DIRECTORY), the current
  // directory, then the launcher's runfiles (found from argv[0] or the environment that
  // `bazel run` and `bazel test` set).
  const char* invocation_env = std::getenv("BUILD_WORKING_DIRECTORY");
  const std::string invocation_dir = invocation_env != nullptr ? invocation_env : "";
  std::error_code error;
  const std::string current_dir = fs::current_path(error).string();
  std::string runfiles_error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::Create(argv[0], &runfiles_error));
  PathSearch search;
  search.invocation_dir = invocation_dir;
  search.current_dir = current_dir;
  if (runfiles != nullptr) {
    search.runfile = [&runfiles](const std::string& path) {
      return runfiles->Rlocation("p3/" + path);
    };
  }
  auto resolve = [&search](const std::string& path) { return ResolveInputPath(path, search); };

  LauncherOptions options;
  options.overrides = overrides;
  options.config_path = resolve(absl::GetFlag(FLAGS_config));
  options.server_binary = resolve(absl::GetFlag(FLAGS_server_binary));
  options.worker_binary = resolve(absl::GetFlag(FLAGS_worker_binary));
  options.working_dir = !invocation_dir.empty() ? invocation_dir : current_dir;
  options.kill_grace = absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_kill_grace_s)));
  options.log_tail_lines = std::max(1, absl::GetFlag(FLAGS_log_tail_lines));
  options.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  options.elastic_control = absl::GetFlag(FLAGS_elastic_control);
  if (!options.elastic_control.empty()) {
    options.elastic_control = std::filesystem::absolute(options.elastic_control).string();
  }
  if (options.max_restarts < 0) {
    return program.Fail(2, absl::StrCat("--max_restarts=", options.max_restarts,
                                        " is out of range; allowed >= 0 (0: no restarts)"));
  }
  options.live_progress = isatty(STDOUT_FILENO) == 1;
  options.server_port = absl::GetFlag(FLAGS_server_port);
  options.remote_output_dir = absl::GetFlag(FLAGS_remote_output_dir);
  if (absl::GetFlag(FLAGS_plot)) {
    options.plot_command = {absl::GetFlag(FLAGS_python), resolve(absl::GetFlag(FLAGS_plot_script))};
  }
  options.ssh_command = absl::StrSplit(absl::GetFlag(FLAGS_ssh), ' ', absl::SkipEmpty());
  // GLIBC_TUNABLES as set above: processes on other hosts get it too (ssh, Slurm and
  // Kubernetes pass none of this environment on).
  options.environment = ForwardedEnvironment();
  const bool check_network_only = absl::GetFlag(FLAGS_check_network);
  if (options.server_port < 0 || options.server_port + config::kMaxProcesses > 65535) {
    return program.Fail(2, absl::StrCat("--server_port=", options.server_port,
                                        " is out of range; allowed 0 (OS-chosen ports) or 1..",
                                        65535 - config::kMaxProcesses));
  }
  const std::string collect_dir = absl::GetFlag(FLAGS_collect);
  if (!collect_dir.empty()) {
    // The folder's own resolved config describes the run.
    options.config_path = (fs::path(resolve(collect_dir)) / "config.textproto").string();
  }
  const std::string hosts_flag = absl::GetFlag(FLAGS_hosts);
  if (!hosts_flag.empty()) {
    const std::string path = resolve(hosts_flag);
    absl::StatusOr<std::string> text = ReadFile(path);
    absl::StatusOr<std::vector<Host>> hosts =
        text.ok() ? ParseHostFile(*text) : absl::StatusOr<std::vector<Host>>(text.status());
    if (!hosts.ok()) {
      return program.Fail(2, absl::StrCat("--hosts=", path, ": ", hosts.status().message()));
    }
    options.hosts = *std::move(hosts);
    if (options.ssh_command.empty()) return program.Fail(2, "--ssh is empty");
  }
  if (!options.remote_output_dir.empty() && (options.hosts.empty() || options.server_port == 0 ||
                                             !fs::path(options.remote_output_dir).is_absolute())) {
    return program.Fail(2,
                        "--remote_output_dir needs --hosts and --server_port (the launcher "
                        "cannot read port files on other hosts) and an absolute path");
  }

  // Everything is checked before any process starts.
  absl::StatusOr<config::ExperimentConfig> config = program.LoadConfig(options.config_path);
  if (!config.ok()) {
    return program.Fail(2, absl::StrCat("invalid config:\n", config.status().message()));
  }
  if (config->mode() == config::kPipelineMode) {
    // One process on this machine, no servers: this process becomes pipeline_train on the
    // same config and overrides, with its result and epochs beside the other runs' files.
    if (options.max_restarts > 0 || !options.hosts.empty() || absl::GetFlag(FLAGS_kubernetes) ||
        absl::GetFlag(FLAGS_slurm) || !collect_dir.empty() || check_network_only) {
      return program.Fail(2, "mode \"pipeline\" runs in one process on this machine: "
                             "--max_restarts, --hosts, --kubernetes, --slurm, --collect and "
                             "--check_network do not apply (docs/pipeline.md)");
    }
    const std::string binary = resolve(absl::GetFlag(FLAGS_pipeline_binary));
    const fs::path out_dir = fs::path(options.working_dir) / config->output_dir();
    fs::create_directories(out_dir, error);
    if (error) {
      return program.Fail(1, absl::StrCat("cannot create ", out_dir.string(), ": ",
                                          error.message()));
    }
    std::vector<std::string> args = {binary, "--config=" + options.config_path,
                                     "--result_file=" + (out_dir / "summary.json").string(),
                                     "--epochs_file=" + (out_dir / "epochs.csv").string()};
    for (const std::string& o : overrides) args.push_back("--set=" + o);
    std::cout << "[p3] mode pipeline: " << absl::StrJoin(args, " ") << std::endl;
    std::vector<char*> argv_exec;
    for (std::string& a : args) argv_exec.push_back(a.data());
    argv_exec.push_back(nullptr);
    execv(binary.c_str(), argv_exec.data());
    return program.Fail(1, absl::StrCat("cannot run ", binary, ": ", strerror(errno)));
  }
  if (const std::string from = absl::GetFlag(FLAGS_membership_from); !from.empty()) {
    const std::string path = resolve(from);
    absl::StatusOr<std::string> text = ReadFile(path);
    absl::StatusOr<std::vector<std::string>> set =
        text.ok() ? ApplyMembershipFrom(*text, &*config)
                  : absl::StatusOr<std::vector<std::string>>(text.status());
    if (!set.ok()) {
      return program.Fail(2, absl::StrCat("--membership_from=", path, ": ", set.status().message()));
    }
    for (const std::string& line : *set) {
      std::cout << "[p3] --membership_from: " << line << "\n";
      options.overrides.push_back(absl::StrCat(line, " (set by --membership_from=", path, ")"));
    }
  }
  if (!options.elastic_control.empty() && config->mode() == "local") {
    return program.Fail(2, "--elastic_control adds and removes worker processes of a cluster: "
                           "not with mode \"local\" (it replays a membership: "
                           "--membership_from or cluster.elastic.change)");
  }
  if (options.max_restarts > 0) {
    if (config->mode() == "local") {
      return program.Fail(2,
                          "--max_restarts needs servers for a restarted worker to rejoin: not "
                          "with mode \"local\"");
    }
    if (config->cluster().has_elastic()) {
      // No rejoins in an elastic run: every process restarts from the newest common
      // checkpoint, with the ranks present there (docs/reliability.md).
      if (config->checkpoint().dir().empty() || config->checkpoint().every() <= 0 ||
          absl::GetFlag(FLAGS_kubernetes) || absl::GetFlag(FLAGS_slurm)) {
        return program.Fail(2, "--max_restarts with cluster.elastic restarts every process "
                               "from checkpoints: it needs checkpoint.dir and "
                               "checkpoint.every, and processes this launcher starts (not "
                               "--slurm or --kubernetes)");
      }
    } else if (config->cluster().rejoin_timeout_s() == 0) {
      // The servers accept a rejoin only with a bound on how long they wait for it.
      const std::string bound =
          absl::StrCat("cluster.rejoin_timeout_s=", config->cluster().peer_timeout_s());
      absl::StatusOr<config::ExperimentConfig> with_bound =
          config::LoadConfig(options.config_path, [&] {
            std::vector<std::string> all = overrides;
            all.push_back(bound);
            return all;
          }());
      if (!with_bound.ok()) {
        return program.Fail(2, absl::StrCat("invalid config:\n", with_bound.status().message()));
      }
      config = *std::move(with_bound);
      options.overrides.push_back(bound + " (set by --max_restarts)");
    }
  }
  if (!collect_dir.empty()) {
    // The folder's resolved config holds the values a search chose; it is not run again.
    config->set_output_dir(resolve(collect_dir));
    Launcher launcher(std::move(options), *std::move(config));
    return launcher.Collect();
  }
  const bool emulate = config->network().bandwidth_gbps() > 0;
  const bool kubernetes = absl::GetFlag(FLAGS_kubernetes);
  const bool slurm = absl::GetFlag(FLAGS_slurm);
  if (emulate && (!options.hosts.empty() || kubernetes || slurm)) {
    return program.Fail(2, absl::StrCat("network.bandwidth_gbps = ",
                                        config->network().bandwidth_gbps(),
                                        " emulates links on this machine; with ",
                                        kubernetes ? "--kubernetes"
                                        : slurm    ? "--slurm"
                                                   : "--hosts",
                                        " the hosts' own network is used: set "
                                        "network.bandwidth_gbps=0"));
  }
  // scheduling.slice_params = 0 / credit_bytes = -1: the simulator chooses before any
  // process starts (after every check), and every process gets the values through the
  // resolved config. Returns an exit status, 0 to go on.
  auto tune = [&]() -> int {
    // An absent pack_params: the resolved config states the default every process reads,
    // tuned or not (tools/bench_throughput.py records it from there).
    if (!config->scheduling().has_pack_params()) {
      config->mutable_scheduling()->set_pack_params(config::EffectivePackParams(*config));
    }
    if (!NeedsTuning(*config)) return 0;
    TuningOptions tuning;
    // The calibration of this data path on this kind of machine (docs/simulator.md); the
    // profiles beside it.
    tuning.calibration_path = resolve("configs/sim/calibration_cpu.json");
    tuning.profile_dir = (fs::path(tuning.calibration_path).parent_path() / "profiles").string();
    tuning.cpu_cores_per_host = std::max(1u, std::thread::hardware_concurrency());
    tuning.other_hosts = !options.hosts.empty() || kubernetes || slurm;
    const TuningReport report = TuneConfig(*config, tuning);
    for (const std::string& line : TuningLogLines(report)) std::cout << "[p3] " << line << "\n";
    std::cout << std::flush;
    // An absent slice_params where nothing was searched (a mode without slices): the
    // resolved config still states the size every process reads.
    if (!config->scheduling().has_slice_params()) {
      config->mutable_scheduling()->set_slice_params(config::EffectiveSliceParams(*config));
    }
    const std::vector<std::string> chosen = TuningOverrides(report);
    for (const std::string& override_text : chosen) {
      absl::Status applied = config::ApplyOverride(override_text, &*config);
      if (applied.ok()) applied = config::ValidateConfig(*config);
      if (!applied.ok()) {
        return program.Fail(1, absl::StrCat("the automatic choice ", override_text,
                                            " is refused: ", applied.message()));
      }
    }
    for (const std::string& override_text : chosen) {
      options.overrides.push_back(override_text + " (automatic: tools/launcher/tuning.h)");
    }
    options.tuning = TuningJson(report);
    return 0;
  };
  if (absl::GetFlag(FLAGS_tune_only)) {
    if (const int status = tune(); status != 0) return status;
    if (!options.tuning.is_null()) std::cout << "[p3] tuning: " << options.tuning.dump() << "\n";
    std::cout << "[p3] --tune_only: slice_params " << config::EffectiveSliceParams(*config)
              << ", credit_bytes " << config::EffectiveCreditBytes(*config) << "; nothing run"
              << std::endl;
    return 0;
  }
  if (kubernetes || slurm) {
    if (const int status = tune(); status != 0) return status;
  }
  if (kubernetes) {
    KubernetesJobOptions kube;
    kube.working_dir = options.working_dir;
    kube.config_source = options.config_path;
    kube.overrides = options.overrides;
    kube.image = absl::GetFlag(FLAGS_kube_image);
    kube.kube_namespace = absl::GetFlag(FLAGS_kube_namespace);
    kube.binary_dir = absl::GetFlag(FLAGS_kube_binary_dir);
    kube.server_port = options.server_port;
    kube.output_claim = absl::GetFlag(FLAGS_kube_output_claim);
    kube.max_restarts = options.max_restarts;
    kube.checkpoint_claim = absl::GetFlag(FLAGS_kube_checkpoint_claim);
    kube.environment = options.environment;
    const absl::Status status = GenerateKubernetes(*config, kube);
    return status.ok() ? 0 : program.Fail(1, status.message());
  }
  if (slurm) {
    SlurmJobOptions job;
    job.working_dir = options.working_dir;
    job.config_source = options.config_path;
    job.overrides = options.overrides;
    job.server_binary = options.server_binary;
    job.worker_binary = options.worker_binary;
    job.launcher = SelfPath();
    job.task_script = resolve(absl::GetFlag(FLAGS_slurm_task_script));
    job.partition = absl::GetFlag(FLAGS_slurm_partition);
    job.time_limit = absl::GetFlag(FLAGS_slurm_time);
    job.max_restarts = options.max_restarts;
    job.environment = options.environment;
    const absl::Status status = GenerateSlurm(*config, job);
    if (status.ok()) return 0;
    return program.Fail(absl::IsInvalidArgument(status) ? 2 : 1, status.message());
  }
  if (check_network_only && !emulate) {
    return program.Fail(2,
                        "--check_network: the config emulates no network "
                        "(network.bandwidth_gbps is 0); e.g. --set=network.bandwidth_gbps=1");
  }
  if ((config::NetworkEmulated(*config) || check_network_only) && geteuid() != 0) {
    return program.Fail(
        2, absl::StrCat("network.bandwidth_gbps = ", config->network().bandwidth_gbps(),
                        ": emulating the network needs root (it creates network namespaces, "
                        "veth links and tbf qdiscs); run the launcher as root (e.g. sudo), or "
                        "set network.bandwidth_gbps=0 to run without emulation (every process "
                        "on this machine's loopback)"));
  }
  if (!check_network_only && options.hosts.empty()) {
    for (const auto& [flag, path, needed] :
         {std::make_tuple("--server_binary", options.server_binary,
                          config::ServerProcessCount(*config) > 0),
          std::make_tuple("--worker_binary", options.worker_binary,
                          !config->worker().has_command())}) {
      if (needed && access(path.c_str(), X_OK) != 0) {
        return program.Fail(2, absl::StrCat(flag, ": ", path, " is not an executable file (",
                                            std::strerror(errno),
                                            "); build it (bazel build //tools:launch_cluster "
                                            "builds it with the launcher) or pass ",
                                            flag, "=PATH"));
      }
    }
  }

  if (!check_network_only) {
    if (const int status = tune(); status != 0) return status;
  }
  Launcher launcher(std::move(options), *std::move(config));
  return check_network_only ? launcher.CheckNetworkOnly() : launcher.Run();
}

}  // namespace
}  // namespace p3::tools::launcher

int main(int argc, char** argv) { return p3::tools::launcher::Main(argc, argv); }
