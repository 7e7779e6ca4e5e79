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
// The launcher is single-threaded: one poll() loop waits on a signalfd (SIGCHLD and the
// termination signals) and an inotify descriptor (port files appearing, rank 0's log
// growing), so it can fork() safely and never sleeps to wait for a condition.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/config.pb.h"
#include "proto/config.h"
#include "tools/multihost.h"
#include "tools/netem.h"
#include "tools/trace_merge.h"

ABSL_FLAG(std::string, config, "configs/default.textproto",
          "Experiment config (text format). A relative path is looked up first in "
          "$BUILD_WORKING_DIRECTORY (where `bazel run` was invoked), then in the current "
          "directory (the runfiles tree under `bazel run`).");
ABSL_FLAG(std::string, server_binary, "server/p3_server",
          "Server executable; relative paths resolve like --config.");
ABSL_FLAG(std::string, worker_binary, "worker/p3_worker",
          "Worker executable; relative paths resolve like --config.");
ABSL_FLAG(double, kill_grace_s, 5, "Seconds between SIGTERM and SIGKILL when stopping processes.");
ABSL_FLAG(int, log_tail_lines, 20, "Lines of a failed process's log to print.");
ABSL_FLAG(bool, check_network, false,
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
ABSL_FLAG(std::string, collect, "",
          "Do not run: read the results a run left in this output folder (its "
          "config.textproto, results/, traces/), write summary.json and trace.json, print the "
          "table. For runs started by Slurm or by hand.");

namespace p3::tools {
namespace {

namespace fs = std::filesystem;
using config::ExperimentConfig;

constexpr char kUsage[] =
    "Runs one experiment on a local P3 cluster.\n"
    "\n"
    "  bazel run //tools:launch_cluster -- [--config=PATH] [--set=field.path=value ...]\n"
    "\n"
    "--set overrides one config field and may be repeated; later ones win, e.g.\n"
    "  --set=training.batch_size=64 --set=mode=baseline --set=optimizer.lr=0.01\n"
    "See docs/launcher.md and docs/config.md.";

// Everything main() resolves from flags and the environment.
struct LauncherOptions {
  // Absolute paths.
  std::string config_path;
  std::string server_binary;
  std::string worker_binary;
  // Folder that a relative config.output_dir is relative to.
  std::string working_dir;
  // Overrides from --set, in order.
  std::vector<std::string> overrides;
  // Default: 5 seconds.
  absl::Duration kill_grace = absl::Seconds(5);
  // Default: 20.
  int log_tail_lines = 20;
  // Redraw one progress line in place (stdout is a terminal) instead of printing lines.
  bool live_progress = false;
  // Hosts to run on over ssh (empty: this machine), and the ssh command.
  std::vector<Host> hosts;
  std::vector<std::string> ssh_command = {"ssh"};
  // Servers listen on server_port + index when > 0. Default: 0 (OS-chosen, port files).
  int server_port = 0;
  // With hosts: the processes' output folder on their hosts; empty = output_dir (shared).
  std::string remote_output_dir;
  // Only measure the emulated network's links (--check_network).
  bool check_network_only = false;
};

// One server or worker process.
struct Child {
  std::string role;  // "server" or "worker".
  int index = 0;     // Server index or worker rank.
  std::string log_path;
  std::string port_file;       // Servers.
  std::string result_file;     // Workers.
  std::string records_file;    // Workers.
  std::string trace_file;      // When the config says trace: true.
  int machine = 0;             // Emulated machine, or host index with --hosts.
  std::string ns_path;         // Network namespace to enter (emulated network).
  const Host* host = nullptr;  // With --hosts: the host it runs on over ssh.
  int stdin_fd = -1;           // ssh processes: the write end of their stdin.
  pid_t pid = -1;
  bool running = false;
  int wait_status = 0;
  absl::Time start_time;
  absl::Time end_time;
  std::optional<int> port;          // Servers, once published.
  google::protobuf::Struct result;  // Workers, once read.
  std::string result_text;          // Workers: the result file as written.

  std::string name() const { return absl::StrCat(role, "_", index); }
  std::string label() const {
    return host != nullptr ? absl::StrCat(role, " ", index, " on ", host->destination)
                           : absl::StrCat(role, " ", index);
  }
  bool exited_cleanly() const {
    return !running && pid > 0 && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  }
};

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrCat("was killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// Writes `contents` to `path` atomically (temporary file + rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    file << contents;
    file.flush();
    if (!file) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The last `lines` lines of the file at `path` (at most its last 64 KiB).
std::string TailOfFile(const std::string& path, int lines) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return "";
  const std::streamoff size = file.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 64 * 1024);
  file.seekg(start);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> all = absl::StrSplit(text, '\n');
  if (!all.empty() && all.back().empty()) all.pop_back();
  if (static_cast<int>(all.size()) > lines) all.erase(all.begin(), all.end() - lines);
  return absl::StrJoin(all, "\n");
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string JsonValue(const google::protobuf::Value& value) {
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(value, &out).ok()) return "null";
  return out;
}

// A PROGRESS line of a worker: `PROGRESS iteration=<i> total=<n> loss=<float>
// samples_per_second=<float>`, optionally followed by `sent_mbps=<float>
// received_mbps=<float>` (this worker's traffic since its previous PROGRESS line, in
// megabits per second). Unknown fields are ignored.
struct Progress {
  int64_t iteration = 0;
  int64_t total = 0;
  double loss = 0;
  double samples_per_second = 0;
  std::optional<double> sent_mbps;
  std::optional<double> received_mbps;
};

std::optional<Progress> ParseProgressLine(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, "PROGRESS ")) return std::nullopt;
  Progress progress;
  int found = 0;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, '=');
    bool ok = false;
    if (kv.first == "iteration") ok = absl::SimpleAtoi(kv.second, &progress.iteration);
    if (kv.first == "total") ok = absl::SimpleAtoi(kv.second, &progress.total);
    if (kv.first == "loss") ok = absl::SimpleAtod(kv.second, &progress.loss);
    if (kv.first == "samples_per_second") {
      ok = absl::SimpleAtod(kv.second, &progress.samples_per_second);
    }
    double rate = 0;
    if (kv.first == "sent_mbps" && absl::SimpleAtod(kv.second, &rate)) progress.sent_mbps = rate;
    if (kv.first == "received_mbps" && absl::SimpleAtod(kv.second, &rate)) {
      progress.received_mbps = rate;
    }
    if (ok) ++found;
  }
  if (found < 4) return std::nullopt;
  return progress;
}

// "812 Mbit/s", "2.41 Gbit/s".
std::string FormatMbps(double mbps) {
  if (mbps >= 1000) return absl::StrFormat("%.2f Gbit/s", mbps / 1000);
  return absl::StrFormat("%.0f Mbit/s", mbps);
}

class Launcher {
 public:
  Launcher(LauncherOptions options, ExperimentConfig config)
      : options_(std::move(options)), config_(std::move(config)) {}

  // Stops any child still running, so that no exit path leaves one behind.
  ~Launcher() {
    for (Child& child : children_) {
      if (child.stdin_fd >= 0) close(child.stdin_fd);
      if (!child.running) continue;
      kill(-child.pid, SIGKILL);
      kill(child.pid, SIGKILL);
      waitpid(child.pid, &child.wait_status, 0);
      child.running = false;
    }
    // (network_, a member, is removed after this: no process runs in it any more.)
    if (signal_fd_ >= 0) close(signal_fd_);
    if (inotify_fd_ >= 0) close(inotify_fd_);
  }

  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Runs the experiment; returns the process exit status.
  int Run(const sigset_t& original_mask, int signal_fd);

  // --check_network: sets up the network, measures its links, removes it.
  int CheckNetworkOnly(const sigset_t& original_mask, int signal_fd);

  // --collect: summary.json and trace.json from the files a run left in output_dir.
  int Collect();

 private:
  // Lists the processes with their files (removing those of an earlier run when
  // `clear_stale`) and, when `write_config`, writes the resolved config.
  absl::Status PrepareOutputDir(bool clear_stale = true, bool write_config = true);
  absl::Status SetUpNetwork();
  // Measures every machine's link; with `strict`, a link outside 85%..105% of its rate
  // is an error.
  absl::Status CheckLinks(bool strict);
  void TearDownNetwork();
  // Merges traces/*.json into trace.json (what exists; missing files are named).
  void MergeTraces();
  // With --hosts and --remote_output_dir: copies the workers' files back over ssh.
  absl::Status FetchRemoteFiles();
  // Where a file of the output folder is on the processes' hosts.
  std::string RemotePath(const std::string& local) const;
  // The address workers use for server `child`.
  std::string ServerAddress(const Child& child) const;
  absl::Status StartProcess(Child& child, const std::string& binary,
                            const std::vector<std::string>& args);
  absl::Status WaitForPorts();
  absl::Status WaitForWorkers();
  absl::Status WaitForServers();
  absl::Status ReadResults();
  absl::Status WriteSummary();
  // Waits up to `timeout` for a signal, a child's exit or a watched file change, then
  // reaps exited children.
  void WaitForEvent(absl::Duration timeout);
  void Reap();
  // The first process that exited non-zero or was killed, as an error with the tail of
  // its log; else OK. A server exiting 0 is not a failure: it may exit as soon as every
  // worker has said it is done, before the workers exit (and if it exits too early, the
  // workers fail and are reported).
  absl::Status CheckForFailure();
  absl::Status FailureOf(const Child& child, const std::string& what);
  absl::Status InterruptedError() const;
  void StopAll();
  void UpdateProgress();
  // Ends the live progress line with a newline, leaving it on the terminal.
  void FinishProgressLine();
  void Say(const std::string& line);
  void ClearProgressLine();
  void PrintTable();

  const LauncherOptions options_;
  const ExperimentConfig config_;
  std::vector<Child> children_;  // Servers first, then workers by rank.
  std::unique_ptr<EmulatedNetwork> network_;
  std::vector<LinkMeasurement> link_checks_;
  std::string trace_path_;  // Set once trace.json is written.
  sigset_t original_mask_;
  int signal_fd_ = -1;
  int inotify_fd_ = -1;
  int interrupt_signal_ = 0;
  int interrupt_count_ = 0;
  absl::Time start_time_;

  std::string output_dir_;
  std::string config_out_;
  std::string config_text_;
  std::string summary_path_;

  // Tail of rank 0's log.
  int64_t log_offset_ = 0;
  std::string log_partial_line_;
  std::optional<Progress> progress_;
  bool progress_line_shown_ = false;
  absl::Time last_progress_draw_ = absl::InfinitePast();
};

void Launcher::Say(const std::string& line) {
  ClearProgressLine();
  std::cout << "[p3] " << line << std::endl;
}

void Launcher::ClearProgressLine() {
  if (progress_line_shown_) {
    std::cout << "\r\033[K" << std::flush;
    progress_line_shown_ = false;
  }
}

absl::Status Launcher::PrepareOutputDir(bool clear_stale, bool write_config) {
  fs::path out(config_.output_dir());
  if (out.is_relative()) out = fs::path(options_.working_dir) / out;
  out = out.lexically_normal();
  output_dir_ = out.string();
  std::error_code error;
  for (const char* sub : {"", "logs", "ports", "results", "records", "traces"}) {
    if (std::string(sub) == "traces" && !config_.trace()) continue;
    fs::create_directories(out / sub, error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("output_dir: cannot create ", (out / sub).string(), ": ", error.message()));
    }
  }
  config_out_ = (out / "config.textproto").string();
  summary_path_ = (out / "summary.json").string();
  // Files of an earlier run in the same folder must not be mistaken for this run's.
  if (clear_stale) {
    fs::remove(summary_path_, error);
    fs::remove(out / "trace.json", error);
  }
  const bool emulated = config::NetworkEmulated(config_) && options_.hosts.empty();
  const int machines = !options_.hosts.empty() ? static_cast<int>(options_.hosts.size())
                                               : (emulated ? config_.network().machines() : 1);
  auto add = [&](const std::string& role, int index, int machine) -> Child& {
    Child child;
    child.role = role;
    child.index = index;
    child.machine = machine;
    if (!options_.hosts.empty()) child.host = &options_.hosts[machine];
    child.log_path = (out / "logs" / (child.name() + ".log")).string();
    if (config_.trace()) {
      child.trace_file = (out / "traces" / (child.name() + ".json")).string();
      if (clear_stale) fs::remove(child.trace_file, error);
    }
    children_.push_back(child);
    return children_.back();
  };
  for (int i = 0; i < config::ServerProcessCount(config_); ++i) {
    Child& server = add("server", i, config::ServerMachine(config_, i, machines));
    server.port_file = (out / "ports" / (server.name() + ".port")).string();
    if (clear_stale) fs::remove(server.port_file, error);
  }
  for (int r = 0; r < config::WorkerProcessCount(config_); ++r) {
    Child& worker = add("worker", r, config::WorkerMachine(config_, r, machines));
    worker.result_file = (out / "results" / (worker.name() + ".json")).string();
    worker.records_file = (out / "records" / (worker.name() + ".csv")).string();
    if (clear_stale) {
      fs::remove(worker.result_file, error);
      fs::remove(worker.records_file, error);
    }
  }
  if (!write_config) return absl::OkStatus();

  std::string text = absl::StrCat(
      "# Resolved experiment config written by launch_cluster: defaults filled, overrides\n"
      "# applied. Source: ",
      options_.config_path, "\n");
  for (const std::string& override_text : options_.overrides) {
    absl::StrAppend(&text, "# --set=", override_text, "\n");
  }
  absl::StrAppend(&text, config::ConfigToText(config_));
  config_text_ = text;
  return WriteFileAtomically(config_out_, text);
}

absl::Status Launcher::StartProcess(Child& child, const std::string& binary,
                                    const std::vector<std::string>& args) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  int stdin_pipe[2] = {-1, -1};
  if (child.host != nullptr) {
    // Over ssh: the remote script creates the folders, writes the config, runs the
    // process, and stops it when ssh's stdin (a pipe the launcher holds) closes.
    RemoteProcess remote;
    const std::string remote_out = RemotePath(output_dir_);
    for (const char* sub : {"logs", "ports", "results", "records", "traces"}) {
      remote.directories.push_back(absl::StrCat(remote_out, "/", sub));
    }
    remote.config_text = config_text_;
    remote.config_path = RemotePath(config_out_);
    remote.working_directory = options_.working_dir;
    remote.argv = argv;
    remote.tag = child.name();
    argv = SshArgv(options_.ssh_command, *child.host, RemoteScript(remote));
    if (pipe2(stdin_pipe, O_CLOEXEC) != 0) {
      return absl::ResourceExhaustedError(absl::StrCat("pipe: ", std::strerror(errno)));
    }
  }
  std::vector<char*> argv_ptrs;
  for (std::string& arg : argv) argv_ptrs.push_back(arg.data());
  argv_ptrs.push_back(nullptr);

  const int log_fd = open(child.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", child.log_path, ": ", std::strerror(errno)));
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int stdin_fd = stdin_pipe[0] >= 0 ? stdin_pipe[0] : null_fd;
  const char* ns_path = child.ns_path.empty() ? nullptr : child.ns_path.c_str();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    if (stdin_pipe[0] >= 0) close(stdin_pipe[0]);
    if (stdin_pipe[1] >= 0) close(stdin_pipe[1]);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start ", child.label(), ": fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    setpgid(0, 0);  // Own process group: stopped as a group, deaf to the terminal's ^C.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // The launcher died before prctl.
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    if (stdin_fd >= 0) dup2(stdin_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (ns_path != nullptr && EnterNamespace(ns_path) != 0) {
      const char message[] = "launch_cluster: cannot enter the network namespace ";
      (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
      (void)!write(STDERR_FILENO, ns_path, strlen(ns_path));
      (void)!write(STDERR_FILENO, "\n", 1);
      _exit(127);
    }
    // ssh is looked up in PATH; the binaries are absolute paths.
    execvp(argv_ptrs[0], argv_ptrs.data());
    const char message[] = "launch_cluster: exec failed: ";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    (void)!write(STDERR_FILENO, argv_ptrs[0], strlen(argv_ptrs[0]));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  setpgid(pid, pid);  // Also here, so that kill(-pid) works before the child runs.
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  if (stdin_pipe[0] >= 0) close(stdin_pipe[0]);
  child.stdin_fd = stdin_pipe[1];
  child.pid = pid;
  child.running = true;
  child.start_time = absl::Now();
  return absl::OkStatus();
}

void Launcher::Reap() {
  for (Child& child : children_) {
    if (!child.running) continue;
    int status = 0;
    if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
      child.running = false;
      child.wait_status = status;
      child.end_time = absl::Now();
      if (child.stdin_fd >= 0) {
        close(child.stdin_fd);
        child.stdin_fd = -1;
      }
    }
  }
}

void Launcher::WaitForEvent(absl::Duration timeout) {
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const int timeout_ms =
      static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 0, 1000 * 1000));
  const int ready = poll(fds, inotify_fd_ >= 0 ? 2 : 1, timeout_ms);
  if (ready > 0 && (fds[0].revents & POLLIN)) {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      if (info.ssi_signo == SIGCHLD) continue;
      ++interrupt_count_;
      if (interrupt_signal_ == 0) interrupt_signal_ = static_cast<int>(info.ssi_signo);
    }
  }
  if (ready > 0 && inotify_fd_ >= 0 && (fds[1].revents & POLLIN)) {
    char buffer[4096];
    while (read(inotify_fd_, buffer, sizeof(buffer)) > 0) {
    }
  }
  Reap();
}

absl::Status Launcher::InterruptedError() const {
  return absl::CancelledError(
      absl::StrCat("interrupted by ", sigabbrev_np(interrupt_signal_) != nullptr
                                          ? absl::StrCat("SIG", sigabbrev_np(interrupt_signal_))
                                          : absl::StrCat("signal ", interrupt_signal_)));
}

absl::Status Launcher::FailureOf(const Child& child, const std::string& what) {
  std::string message = child.pid > 0 ? absl::StrCat(child.label(), " (pid ", child.pid, ") ", what)
                                      : absl::StrCat(child.label(), " ", what);
  const std::string tail = TailOfFile(child.log_path, options_.log_tail_lines);
  if (tail.empty()) {
    absl::StrAppend(&message, "\n  (its log ", child.log_path, " is empty)");
  } else {
    absl::StrAppend(&message, "\n--- last lines of ", child.log_path, " ---\n", tail,
                    "\n--- end of ", child.name(), ".log ---");
  }
  return absl::AbortedError(message);
}

absl::Status Launcher::CheckForFailure() {
  // Report the process that ended first: the others often fail because of it.
  const Child* first = nullptr;
  for (const Child& child : children_) {
    if (child.running || child.pid <= 0 || child.exited_cleanly()) continue;
    if (first == nullptr || child.end_time < first->end_time) first = &child;
  }
  if (first == nullptr) return absl::OkStatus();
  return FailureOf(*first, DescribeWaitStatus(first->wait_status));
}

absl::Status Launcher::WaitForPorts() {
  const absl::Duration timeout = absl::Seconds(config_.cluster().peer_timeout_s());
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int missing = 0;
    for (Child& child : children_) {
      if (child.role != "server" || child.port.has_value()) continue;
      absl::StatusOr<std::string> text = ReadFile(child.port_file);
      if (!text.ok()) {
        ++missing;
        continue;
      }
      int port = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port) || port <= 0 ||
          port > 65535) {
        return FailureOf(child, absl::StrCat("wrote an invalid port file ", child.port_file, ": \"",
                                             absl::CEscape(*text), "\""));
      }
      child.port = port;
      Say(absl::StrCat(child.label(), " listening on ", ServerAddress(child), ":", port));
    }
    if (missing == 0) return absl::OkStatus();
    absl::Status failure = CheckForFailure();
    if (!failure.ok()) return failure;
    for (const Child& child : children_) {
      if (child.role == "server" && !child.port.has_value() && !child.running &&
          !fs::exists(child.port_file)) {
        return FailureOf(child, "exited with status 0 without writing its port file");
      }
    }
    if (interrupt_signal_ != 0) return InterruptedError();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      for (const Child& child : children_) {
        if (child.role == "server" && !child.port.has_value()) {
          return FailureOf(child, absl::StrCat("did not write its port file ", child.port_file,
                                               " within cluster.peer_timeout_s = ",
                                               absl::FormatDuration(timeout)));
        }
      }
    }
    WaitForEvent(deadline - now);
  }
}

absl::Status Launcher::WaitForWorkers() {
  while (true) {
    UpdateProgress();
    absl::Status failure = CheckForFailure();
    if (!failure.ok()) return failure;
    if (interrupt_signal_ != 0) return InterruptedError();
    bool all_done = true;
    for (const Child& child : children_) {
      if (child.role == "worker" && child.running) all_done = false;
    }
    if (all_done) {
      UpdateProgress();
      FinishProgressLine();
      return absl::OkStatus();
    }
    // The timeout only refreshes the elapsed time of the live progress line.
    WaitForEvent(absl::Seconds(1));
  }
}

absl::Status Launcher::WaitForServers() {
  const absl::Duration timeout = absl::Seconds(config_.cluster().peer_timeout_s());
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::Status failure = CheckForFailure();
    if (!failure.ok()) return failure;
    if (interrupt_signal_ != 0) return InterruptedError();
    const Child* running = nullptr;
    for (const Child& child : children_) {
      if (child.running) running = &child;
    }
    if (running == nullptr) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return FailureOf(
          *running, absl::StrCat("did not exit within cluster.peer_timeout_s = ",
                                 absl::FormatDuration(timeout), " after all workers had finished"));
    }
    WaitForEvent(deadline - now);
  }
}

void Launcher::UpdateProgress() {
  const Child* rank0 = nullptr;
  for (const Child& child : children_) {
    if (child.role == "worker" && child.index == 0) rank0 = &child;
  }
  std::vector<Progress> new_progress;
  if (rank0 != nullptr) {
    std::ifstream log(rank0->log_path, std::ios::binary);
    if (log) {
      log.seekg(log_offset_);
      std::string chunk((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      log_offset_ += static_cast<int64_t>(chunk.size());
      log_partial_line_ += chunk;
      size_t newline;
      while ((newline = log_partial_line_.find('\n')) != std::string::npos) {
        std::optional<Progress> progress =
            ParseProgressLine(absl::string_view(log_partial_line_).substr(0, newline));
        if (progress.has_value()) new_progress.push_back(*progress);
        log_partial_line_.erase(0, newline + 1);
      }
    }
  }
  const absl::Time now = absl::Now();
  auto format = [this, now](const Progress& progress) {
    std::string traffic;
    if (progress.sent_mbps.has_value()) {
      absl::StrAppend(&traffic, "  sent ", FormatMbps(*progress.sent_mbps));
    }
    if (progress.received_mbps.has_value()) {
      absl::StrAppend(&traffic, "  received ", FormatMbps(*progress.received_mbps));
    }
    return absl::StrFormat("[p3] iter %d/%d  loss %.4g  %.0f samples/s%s  elapsed %ds",
                           progress.iteration, progress.total, progress.loss,
                           progress.samples_per_second, traffic,
                           absl::ToInt64Seconds(now - start_time_));
  };
  if (!options_.live_progress) {
    // Plain lines for logs and pipes: one per PROGRESS line of rank 0.
    for (const Progress& progress : new_progress) std::cout << format(progress) << "\n";
    if (!new_progress.empty()) std::cout << std::flush;
    return;
  }
  if (!new_progress.empty()) progress_ = new_progress.back();
  if (new_progress.empty() && now - last_progress_draw_ < absl::Seconds(1)) return;
  const std::string line =
      progress_.has_value()
          ? format(*progress_)
          : absl::StrFormat("[p3] waiting for rank 0's first progress line  elapsed %ds",
                            absl::ToInt64Seconds(now - start_time_));
  std::cout << "\r\033[K" << line << std::flush;
  progress_line_shown_ = true;
  last_progress_draw_ = now;
}

void Launcher::FinishProgressLine() {
  if (progress_line_shown_) {
    std::cout << "\n" << std::flush;
    progress_line_shown_ = false;
  }
}

absl::Status Launcher::ReadResults() {
  for (Child& child : children_) {
    if (child.role != "worker") continue;
    absl::StatusOr<std::string> text = ReadFile(child.result_file);
    if (!text.ok()) {
      return FailureOf(
          child, absl::StrCat("exited with status 0 but wrote no result file ", child.result_file));
    }
    child.result_text = std::string(absl::StripAsciiWhitespace(*text));
    google::protobuf::util::Status parsed =
        google::protobuf::util::JsonStringToMessage(child.result_text, &child.result);
    if (!parsed.ok()) {
      return FailureOf(child, absl::StrCat("wrote a result file that is not a JSON object: ",
                                           child.result_file, ": ", parsed.ToString()));
    }
    for (const char* key : {"rank", "iterations", "samples_per_second", "final_loss",
                            "test_accuracy", "param_l2", "wall_seconds"}) {
      if (child.result.fields().count(key) == 0) {
        return FailureOf(
            child, absl::StrCat("wrote a result file without \"", key, "\": ", child.result_file));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Launcher::WriteSummary() {
  const Child* rank0 = nullptr;
  std::vector<std::string> results;
  for (const Child& child : children_) {
    if (child.role != "worker") continue;
    if (child.index == 0) rank0 = &child;
    results.push_back(child.result_text);
  }
  auto rank0_value = [&](const char* key) { return JsonValue(rank0->result.fields().at(key)); };
  std::string json = "{\n";
  auto add = [&json](const std::string& key, const std::string& value) {
    absl::StrAppend(&json, "  ", JsonString(key), ": ", value, ",\n");
  };
  add("name", JsonString(config_.name()));
  add("mode", JsonString(config_.mode()));
  add("model", JsonString(config_.model().name()));
  add("workers", absl::StrCat(config_.cluster().workers()));
  add("servers", absl::StrCat(config_.cluster().servers()));
  add("worker_processes", absl::StrCat(config::WorkerProcessCount(config_)));
  add("server_processes", absl::StrCat(config::ServerProcessCount(config_)));
  add("batch_size_per_worker", absl::StrCat(config_.training().batch_size()));
  add("global_batch_size", absl::StrCat(config::GlobalBatchSize(config_)));
  for (const char* key : {"iterations", "samples_per_second", "final_loss", "test_accuracy",
                          "param_l2", "wall_seconds"}) {
    add(key, rank0_value(key));
  }
  add("launcher_wall_seconds",
      absl::StrFormat("%.3f", absl::ToDoubleSeconds(absl::Now() - start_time_)));
  add("config", JsonString(config_out_));
  add("output_dir", JsonString(output_dir_));
  if (!trace_path_.empty()) add("trace", JsonString(trace_path_));
  if (network_ != nullptr || !link_checks_.empty()) {
    const config::NetworkConfig& network = config_.network();
    std::vector<std::string> links;
    for (const LinkMeasurement& m : link_checks_) {
      links.push_back(absl::StrFormat(
          "{\"from\": %d, \"to\": %d, \"gbps\": %.4f, \"bytes\": %d, \"seconds\": %.3f}", m.from,
          m.to, m.gbps, m.bytes, m.seconds));
    }
    add("network", absl::StrCat("{\"bandwidth_gbps\": ", network.bandwidth_gbps(),
                                ", \"machines\": ", network.machines(),
                                ", \"placement\": ", JsonString(network.placement()),
                                ", \"subnet\": ", JsonString(network.subnet()),
                                ", \"links_checked\": [", absl::StrJoin(links, ", "), "]}"));
  }
  if (!options_.hosts.empty()) {
    std::vector<std::string> hosts;
    for (const Host& host : options_.hosts) hosts.push_back(JsonString(host.destination));
    add("hosts", absl::StrCat("[", absl::StrJoin(hosts, ", "), "]"));
  }
  absl::StrAppend(&json, "  \"workers_results\": [\n    ", absl::StrJoin(results, ",\n    "),
                  "\n  ]\n}\n");
  return WriteFileAtomically(summary_path_, json);
}

void Launcher::StopAll() {
  std::vector<Child*> running;
  for (Child& child : children_) {
    if (child.running) running.push_back(&child);
  }
  if (running.empty()) return;
  std::vector<std::string> names;
  for (Child* child : running) names.push_back(child->name());
  Say(absl::StrCat("stopping ", absl::StrJoin(names, ", "), " (SIGTERM)"));
  for (Child* child : running) kill(-child->pid, SIGTERM);

  const int interrupts_before = interrupt_count_;
  const absl::Time deadline = absl::Now() + options_.kill_grace;
  while (true) {
    bool any = false;
    for (Child* child : running) any = any || child->running;
    if (!any) return;
    const absl::Time now = absl::Now();
    // A second ^C means "now": skip the grace period.
    if (now >= deadline || interrupt_count_ > interrupts_before) break;
    WaitForEvent(deadline - now);
  }
  for (Child* child : running) {
    if (!child->running) continue;
    Say(absl::StrCat(child->name(), " did not stop; sending SIGKILL"));
    kill(-child->pid, SIGKILL);
  }
  for (Child* child : running) {
    if (!child->running) continue;
    int status = 0;
    if (waitpid(child->pid, &status, 0) == child->pid) {
      child->running = false;
      child->wait_status = status;
      child->end_time = absl::Now();
    }
  }
}

void Launcher::PrintTable() {
  auto field = [](const Child& child, const char* key) -> std::string {
    auto it = child.result.fields().find(key);
    if (it == child.result.fields().end()) return "-";
    const google::protobuf::Value& value = it->second;
    if (value.kind_case() != google::protobuf::Value::kNumberValue) return "-";
    const double number = value.number_value();
    if (number == std::floor(number) && std::fabs(number) < 1e15) {
      return absl::StrCat(static_cast<int64_t>(number));
    }
    return absl::StrFormat("%.4g", number);
  };
  std::cout << absl::StrFormat("%-10s %8s  %-26s %8s %10s %11s %10s %9s\n", "process", "pid",
                               "status", "seconds", "iterations", "samples/s", "final_loss",
                               "test_acc");
  for (const Child& child : children_) {
    std::string status = child.result_text.empty() ? "not started" : "result file";
    double seconds = 0;
    if (child.pid > 0) {
      status = child.running ? "running" : DescribeWaitStatus(child.wait_status);
      absl::StrReplaceAll({{"exited with status", "exit"}, {"was killed by signal", "signal"}},
                          &status);
      const absl::Time end = child.running ? absl::Now() : child.end_time;
      seconds = absl::ToDoubleSeconds(end - child.start_time);
    }
    const bool worker = child.role == "worker";
    const std::string row = absl::StrFormat(
        "%-10s %8s  %-26s %8.1f %10s %11s %10s %9s", child.name(),
        child.pid > 0 ? absl::StrCat(child.pid) : "-", status, seconds,
        worker ? field(child, "iterations") : "", worker ? field(child, "samples_per_second") : "",
        worker ? field(child, "final_loss") : "", worker ? field(child, "test_accuracy") : "");
    std::cout << absl::StripTrailingAsciiWhitespace(row) << "\n";
  }
  std::cout << std::flush;
}

std::string Launcher::RemotePath(const std::string& local) const {
  if (options_.hosts.empty() || options_.remote_output_dir.empty()) return local;
  absl::string_view rest = local;
  if (!absl::ConsumePrefix(&rest, output_dir_)) return local;
  return absl::StrCat(options_.remote_output_dir, rest);
}

std::string Launcher::ServerAddress(const Child& child) const {
  std::string host = config_.cluster().host();
  if (network_ != nullptr) host = network_->address(child.machine);
  if (child.host != nullptr) host = child.host->address;
  return absl::StrContains(host, ':') ? "[" + host + "]" : host;
}

absl::Status Launcher::SetUpNetwork() {
  const config::NetworkConfig& network = config_.network();
  NetworkSpec spec;
  spec.run_id = RunIdForPid(getpid());
  spec.machines = network.machines();
  spec.subnet = network.subnet();
  spec.rate_bits_per_second = network.bandwidth_gbps() * 1e9;
  spec.burst_bytes = network.tbf_burst_bytes();
  spec.latency = absl::Milliseconds(network.tbf_latency_ms());
  absl::StatusOr<std::unique_ptr<EmulatedNetwork>> created = EmulatedNetwork::Create(spec);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("network.bandwidth_gbps = ", network.bandwidth_gbps(), ": ",
                                     created.status().message()));
  }
  network_ = *std::move(created);
  for (Child& child : children_) child.ns_path = network_->namespace_path(child.machine);
  Say(absl::StrFormat(
      "emulated network: %d machine(s) on a bridge, %g Gbit/s per machine and direction "
      "(tbf burst %d bytes, latency %g ms); namespaces %s-m0..m%d, bridge in %s",
      spec.machines, network.bandwidth_gbps(), EffectiveBurstBytes(spec), network.tbf_latency_ms(),
      spec.run_id, spec.machines - 1, BridgeNamespace(spec.run_id)));
  for (int m = 0; m < spec.machines; ++m) {
    std::vector<std::string> names;
    for (const Child& child : children_) {
      if (child.machine == m) names.push_back(child.name());
    }
    if (children_.empty()) {
      Say(absl::StrCat("  machine ", m, " ", network_->address(m)));
    } else {
      Say(absl::StrCat("  machine ", m, " ", network_->address(m), ": ",
                       names.empty() ? "(idle)" : absl::StrJoin(names, ", ")));
    }
  }
  const double total = network.bandwidth_gbps() * spec.machines;
  if (total > 20) {
    Say(absl::StrFormat(
        "note: %d links x %g Gbit/s = %g Gbit/s in all; the CPUs of one machine emulate about "
        "20 Gbit/s in all (docs/network.md), so links may not reach their rate",
        spec.machines, network.bandwidth_gbps(), total));
  }
  return absl::OkStatus();
}

absl::Status Launcher::CheckLinks(bool strict) {
  const std::vector<std::pair<int, int>> links = RingLinks(network_->machines());
  const double configured = config_.network().bandwidth_gbps();
  if (links.empty()) {
    Say("link check: one machine, no link between machines to measure");
    return absl::OkStatus();
  }
  const absl::Duration each = absl::Seconds(config_.network().check_seconds());
  Say(absl::StrCat("link check: ", links.size(), " link(s), ", absl::FormatDuration(each),
                   " each, one at a time (TCP, receiver's goodput; "
                   "TCP/IP headers make about 95.7% of the rate the expected figure)"));
  std::vector<std::string> outside;
  std::vector<std::string> slow_links;
  for (const auto& [from, to] : links) {
    WaitForEvent(absl::ZeroDuration());
    if (interrupt_signal_ != 0) return InterruptedError();
    absl::StatusOr<LinkMeasurement> m = MeasureLink(*network_, from, to, each);
    if (!m.ok()) return m.status();
    link_checks_.push_back(*m);
    const double ratio = m->gbps / configured;
    // Above the rate, or nothing at all: the emulation is broken. Well below it: usually
    // the 2 cores are busy (the shaping cannot make a link faster than the CPU allows).
    const bool broken = ratio > 1.05 || m->gbps <= 0;
    const bool slow = ratio < 0.85;
    Say(absl::StrFormat(
        "  machine %d -> machine %d: %.3f Gbit/s measured, %.3f configured (%.1f%%)%s", from, to,
        m->gbps, configured, 100 * ratio,
        broken ? "  LIMIT NOT HELD" : slow ? "  below 85% (busy machine?)" : ""));
    if (broken) outside.push_back(absl::StrCat(from, "->", to));
    if (slow) slow_links.push_back(absl::StrCat(from, "->", to));
  }
  if (!slow_links.empty()) {
    Say(absl::StrCat("warning: link(s) ", absl::StrJoin(slow_links, ", "),
                     " below 85% of the configured rate: is the machine busy? (docs/network.md)"));
  }
  if (!outside.empty()) {
    const std::string message =
        absl::StrCat("link(s) ", absl::StrJoin(outside, ", "),
                     " above 105% of the configured rate, or carrying nothing: the limit does "
                     "not hold (docs/network.md)");
    if (strict) return absl::FailedPreconditionError(message);
    Say("warning: " + message);
  }
  return absl::OkStatus();
}

void Launcher::TearDownNetwork() {
  if (network_ == nullptr) return;
  const std::string run_id = network_->spec().run_id;
  absl::Status status = network_->Destroy();
  network_.reset();
  if (status.ok()) {
    Say(absl::StrCat("removed the emulated network (", run_id, "-*)"));
  } else {
    std::cerr << "[p3] warning: removing the emulated network: " << status.message()
              << "\n[p3] `launch_cluster --cleanup_network` removes what is left" << std::endl;
  }
}

void Launcher::MergeTraces() {
  if (!config_.trace()) return;
  std::vector<std::string> inputs;
  std::vector<std::string> missing;
  for (const Child& child : children_) {
    if (child.trace_file.empty()) continue;
    if (fs::exists(child.trace_file)) {
      inputs.push_back(child.trace_file);
    } else {
      missing.push_back(child.name());
    }
  }
  if (inputs.empty()) {
    Say(absl::StrCat("no process wrote a trace (", output_dir_, "/traces is empty)"));
    return;
  }
  const std::string path = (fs::path(output_dir_) / "trace.json").string();
  absl::StatusOr<TraceMergeStats> stats = MergeTraceFiles(inputs, path);
  if (!stats.ok()) {
    Say(absl::StrCat("warning: cannot merge the traces: ", stats.status().message()));
    return;
  }
  trace_path_ = path;
  Say(absl::StrCat(
      "merged the traces: ", stats->events, " events from ", stats->files, " process(es)",
      missing.empty() ? "" : " (none from " + absl::StrJoin(missing, ", ") + ")",
      stats->dropped_events > 0
          ? absl::StrCat(", ", stats->dropped_events, " dropped at the recorders' limit")
          : "",
      "; open trace.json in https://ui.perfetto.dev or chrome://tracing"));
}

// Runs `argv` with stdout to `stdout_path` (or /dev/null when empty); true if it exits 0.
bool RunQuietly(const std::vector<std::string>& argv, const std::string& stdout_path,
                const sigset_t& original_mask) {
  std::vector<std::string> args = argv;
  std::vector<char*> ptrs;
  for (std::string& arg : args) ptrs.push_back(arg.data());
  ptrs.push_back(nullptr);
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  const int out_fd = stdout_path.empty() ? null_fd
                                         : open(stdout_path.c_str(),
                                                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) {
    if (null_fd >= 0) close(null_fd);
    return false;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &original_mask, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    execvp(ptrs[0], ptrs.data());
    _exit(127);
  }
  if (out_fd != null_fd) close(out_fd);
  if (null_fd >= 0) close(null_fd);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

absl::Status Launcher::FetchRemoteFiles() {
  if (options_.hosts.empty() || options_.remote_output_dir.empty()) return absl::OkStatus();
  // One ssh per host: tar the files missing here (results, records, traces) over stdout.
  for (size_t h = 0; h < options_.hosts.size(); ++h) {
    std::vector<std::string> relative;
    for (const Child& child : children_) {
      if (child.host != &options_.hosts[h]) continue;
      for (const std::string& local : {child.result_file, child.records_file, child.trace_file}) {
        if (local.empty() || fs::exists(local)) continue;
        relative.push_back(fs::path(local).lexically_relative(output_dir_).string());
      }
    }
    if (relative.empty()) continue;
    std::vector<std::string> tar = {"tar", "-C", options_.remote_output_dir, "--ignore-failed-read",
                                    "-cf", "-"};
    tar.insert(tar.end(), relative.begin(), relative.end());
    std::vector<std::string> ssh = options_.ssh_command;
    ssh.insert(ssh.end(),
               {"-o", "BatchMode=yes", options_.hosts[h].destination, ShellCommand(tar)});
    const std::string archive = absl::StrCat(output_dir_, "/.fetch_host_", h, ".tar");
    const bool fetched = RunQuietly(ssh, archive, original_mask_) &&
                         RunQuietly({"tar", "-C", output_dir_, "-xf", archive}, "", original_mask_);
    fs::remove(archive);
    if (!fetched) {
      // Missing results are reported by ReadResults, missing traces by MergeTraces.
      Say(absl::StrCat("warning: cannot copy the files of host ", options_.hosts[h].destination,
                       " from ", options_.remote_output_dir));
    }
  }
  return absl::OkStatus();
}

int Launcher::Run(const sigset_t& original_mask, int signal_fd) {
  original_mask_ = original_mask;
  signal_fd_ = signal_fd;
  start_time_ = absl::Now();

  absl::Status status = PrepareOutputDir();
  if (!status.ok()) {
    std::cerr << "launch_cluster: " << status.message() << "\n";
    return 2;
  }
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ >= 0) {
    inotify_add_watch(inotify_fd_, (fs::path(output_dir_) / "ports").c_str(),
                      IN_MOVED_TO | IN_CLOSE_WRITE);
  }
  const int servers = config::ServerProcessCount(config_);
  const int workers = config::WorkerProcessCount(config_);
  Say(absl::StrCat("experiment \"", config_.name(), "\": mode ", config_.mode(), ", model ",
                   config_.model().name(), ", ", servers, " server(s), ", workers,
                   " worker(s), batch ", config_.training().batch_size(), " per worker (",
                   config::GlobalBatchSize(config_), " in all)"));
  Say(absl::StrCat("output: ", output_dir_));
  if (!options_.hosts.empty()) {
    for (size_t h = 0; h < options_.hosts.size(); ++h) {
      std::vector<std::string> names;
      for (const Child& child : children_) {
        if (child.machine == static_cast<int>(h)) names.push_back(child.name());
      }
      Say(absl::StrCat("  host ", h, " ", options_.hosts[h].destination, " (",
                       options_.hosts[h].address,
                       "): ", names.empty() ? "(idle)" : absl::StrJoin(names, ", ")));
    }
  }
  if (config::NetworkEmulated(config_) && options_.hosts.empty()) {
    status = SetUpNetwork();
    if (status.ok() && config_.network().check_links()) status = CheckLinks(/*strict=*/false);
  } else if (config_.network().bandwidth_gbps() > 0 && servers == 0) {
    Say("mode local runs one process: no network to emulate");
  }

  // Servers first: the workers need their ports.
  for (Child& child : children_) {
    if (child.role != "server" || !status.ok()) continue;
    std::vector<std::string> args = {"--config=" + RemotePath(config_out_),
                                     absl::StrCat("--server_index=", child.index),
                                     "--port_file=" + RemotePath(child.port_file)};
    if (options_.server_port > 0) {
      child.port = options_.server_port + child.index;
      args.push_back(absl::StrCat("--port=", *child.port));
    }
    if (network_ != nullptr || child.host != nullptr) {
      std::string bind = ServerAddress(child);
      if (absl::StartsWith(bind, "[")) bind = bind.substr(1, bind.size() - 2);
      args.push_back("--set=cluster.host=" + bind);
    }
    if (!child.trace_file.empty()) args.push_back("--trace_file=" + RemotePath(child.trace_file));
    status = StartProcess(child, options_.server_binary, args);
  }
  if (status.ok() && servers > 0) {
    if (options_.server_port > 0) {
      Say(absl::StrCat("started ", servers, " server(s) on fixed ports ", options_.server_port,
                       "..", options_.server_port + servers - 1));
    } else {
      Say(absl::StrCat("started ", servers, " server(s); waiting for their ports"));
      status = WaitForPorts();
    }
  }
  if (status.ok()) {
    std::vector<std::string> addresses;
    for (const Child& child : children_) {
      if (child.role == "server") {
        addresses.push_back(absl::StrCat(ServerAddress(child), ":", *child.port));
      }
    }
    for (Child& child : children_) {
      if (child.role != "worker" || !status.ok()) continue;
      std::vector<std::string> args = {"--config=" + RemotePath(config_out_),
                                       absl::StrCat("--rank=", child.index),
                                       "--servers=" + absl::StrJoin(addresses, ","),
                                       "--result_file=" + RemotePath(child.result_file),
                                       "--records_file=" + RemotePath(child.records_file)};
      if (!child.trace_file.empty()) {
        args.push_back("--trace_file=" + RemotePath(child.trace_file));
      }
      status = StartProcess(child, options_.worker_binary, args);
      if (status.ok() && child.index == 0 && inotify_fd_ >= 0) {
        inotify_add_watch(inotify_fd_, child.log_path.c_str(), IN_MODIFY);
      }
    }
  }
  if (status.ok()) {
    Say(absl::StrCat("started ", workers,
                     " worker(s); rank 0's log: ", children_[servers].log_path));
    status = WaitForWorkers();
  }
  if (status.ok() && servers > 0) status = WaitForServers();
  if (status.ok()) status = FetchRemoteFiles();
  if (status.ok()) status = ReadResults();
  if (status.ok()) MergeTraces();
  if (status.ok()) status = WriteSummary();

  if (!status.ok()) {
    ClearProgressLine();
    std::cout << std::flush;
    if (absl::IsCancelled(status)) {
      std::cerr << "[p3] " << status.message() << "\n";
    } else {
      std::cerr << "[p3] FAILED: " << status.message() << "\n";
    }
    StopAll();
    PrintTable();
    TearDownNetwork();
    std::cerr << "[p3] run failed; logs are in " << output_dir_ << "/logs" << std::endl;
    return absl::IsCancelled(status) ? 128 + interrupt_signal_ : 1;
  }

  std::cout << "\n";
  PrintTable();
  TearDownNetwork();
  const Child& rank0 = children_[servers];
  auto number = [&rank0](const char* key) { return JsonValue(rank0.result.fields().at(key)); };
  Say(absl::StrCat("done in ",
                   absl::StrFormat("%.1f s", absl::ToDoubleSeconds(absl::Now() - start_time_)),
                   ": ", number("iterations"), " iterations, ", number("samples_per_second"),
                   " samples/s, final loss ", number("final_loss"), ", test accuracy ",
                   number("test_accuracy")));
  if (!trace_path_.empty()) Say(absl::StrCat("trace: ", trace_path_));
  Say(absl::StrCat("summary: ", summary_path_));
  return 0;
}

int Launcher::CheckNetworkOnly(const sigset_t& original_mask, int signal_fd) {
  original_mask_ = original_mask;
  signal_fd_ = signal_fd;
  start_time_ = absl::Now();
  absl::Status status = SetUpNetwork();
  if (status.ok()) status = CheckLinks(/*strict=*/true);
  TearDownNetwork();
  if (!status.ok()) {
    std::cerr << "[p3] " << (absl::IsCancelled(status) ? "" : "FAILED: ") << status.message()
              << std::endl;
    return absl::IsCancelled(status) ? 128 + interrupt_signal_ : 1;
  }
  Say("no link exceeds its configured rate");
  return 0;
}

int Launcher::Collect() {
  start_time_ = absl::Now();
  absl::Status status = PrepareOutputDir(/*clear_stale=*/false, /*write_config=*/false);
  if (status.ok()) status = ReadResults();
  if (status.ok()) MergeTraces();
  if (status.ok()) status = WriteSummary();
  if (!status.ok()) {
    std::cerr << "[p3] FAILED: " << status.message() << std::endl;
    return 1;
  }
  PrintTable();
  Say(absl::StrCat("summary: ", summary_path_));
  return 0;
}

// A relative path given on the command line: where `bazel run` was invoked if the file
// is there, else the current directory (the runfiles tree under `bazel run`).
std::string ResolveInputPath(const std::string& path, const std::string& invocation_dir) {
  fs::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  if (!invocation_dir.empty()) {
    const fs::path candidate = fs::path(invocation_dir) / p;
    std::error_code error;
    if (fs::exists(candidate, error)) return candidate.lexically_normal().string();
  }
  std::error_code error;
  return (fs::current_path(error) / p).lexically_normal().string();
}

// Removes every --set / -set argument from `argv` and returns their values in order:
// absl's repeated flags keep only the last value, and a value may contain commas.
std::vector<std::string> ExtractSetFlags(std::vector<char*>& argv) {
  std::vector<std::string> values;
  std::vector<char*> rest(argv.begin(), argv.begin() + 1);
  for (size_t i = 1; i < argv.size(); ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {  // Everything after "--" is left to absl (as positional).
      rest.insert(rest.end(), argv.begin() + i, argv.end());
      break;
    }
    if (absl::ConsumePrefix(&arg, "--set=") || absl::ConsumePrefix(&arg, "-set=")) {
      values.emplace_back(arg);
    } else if ((arg == "--set" || arg == "-set") && i + 1 < argv.size()) {
      values.emplace_back(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  argv = rest;
  return values;
}

// --cleanup_network: removes the namespaces of launchers that no longer run.
int CleanupNetwork() {
  if (geteuid() != 0) {
    std::cerr << "launch_cluster: --cleanup_network needs root (it deletes network namespaces)\n";
    return 2;
  }
  const std::vector<std::string> stale = StaleNamespaces(ListNamespaces(), ProcessAlive);
  if (stale.empty()) {
    std::cout << "[p3] no stale network namespaces (p3-<pid>-*) to remove" << std::endl;
    return 0;
  }
  int failures = 0;
  for (const std::string& name : stale) {
    absl::Status status = DeleteNamespace(name);
    if (status.ok()) {
      std::cout << "[p3] removed network namespace " << name << std::endl;
    } else {
      std::cerr << "[p3] " << status.message() << std::endl;
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}

// The resolved config as launch_cluster writes it, with a header naming its origin.
std::string ResolvedConfigText(const LauncherOptions& options, const ExperimentConfig& config,
                               const std::string& purpose) {
  std::string text =
      absl::StrCat("# Resolved experiment config written by launch_cluster ", purpose,
                   ": defaults filled, overrides applied.\n# Source: ", options.config_path, "\n");
  for (const std::string& override_text : options.overrides) {
    absl::StrAppend(&text, "# --set=", override_text, "\n");
  }
  absl::StrAppend(&text, config::ConfigToText(config));
  return text;
}

absl::Status WriteExecutable(const std::string& path, const std::string& contents,
                             bool executable) {
  absl::Status status = WriteFileAtomically(path, contents);
  if (status.ok() && executable && chmod(path.c_str(), 0755) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("chmod ", path, ": ", std::strerror(errno)));
  }
  return status;
}

// --slurm: writes <output_dir>/slurm/p3.sbatch, the task script and the config.
int GenerateSlurm(const LauncherOptions& options, ExperimentConfig config,
                  const std::string& task_script) {
  fs::path out(config.output_dir());
  if (out.is_relative()) out = fs::path(options.working_dir) / out;
  out = out.lexically_normal();
  config.set_output_dir(out.string());
  std::error_code error;
  fs::create_directories(out / "slurm", error);
  if (error) {
    std::cerr << "launch_cluster: cannot create " << (out / "slurm") << ": " << error.message()
              << "\n";
    return 2;
  }
  absl::StatusOr<std::string> script = ReadFile(task_script);
  if (!script.ok()) {
    std::cerr << "launch_cluster: --slurm_task_script: " << script.status().message() << "\n";
    return 2;
  }
  char self[4096] = {};
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  SlurmOptions slurm;
  slurm.server_binary = options.server_binary;
  slurm.worker_binary = options.worker_binary;
  slurm.launcher = length > 0 ? std::string(self, length) : "launch_cluster";
  slurm.task_script = (out / "slurm" / "p3_slurm_task.sh").string();
  slurm.output_dir = out.string();
  slurm.partition = absl::GetFlag(FLAGS_slurm_partition);
  slurm.time_limit = absl::GetFlag(FLAGS_slurm_time);
  const std::string batch = (out / "slurm" / "p3.sbatch").string();
  for (absl::Status status :
       {WriteExecutable((out / "config.textproto").string(),
                        ResolvedConfigText(options, config, "for Slurm"), false),
        WriteExecutable(slurm.task_script, *script, true),
        WriteExecutable(batch, SlurmBatchScript(config, slurm), true)}) {
    if (!status.ok()) {
      std::cerr << "launch_cluster: " << status.message() << "\n";
      return 1;
    }
  }
  std::cout << "[p3] wrote " << batch << " (with " << slurm.task_script << " and "
            << (out / "config.textproto").string() << ")\n"
            << "[p3] " << out.string()
            << " and the binaries must be reachable at the same paths on every node "
               "(a shared file system)\n"
            << "[p3] submit with: sbatch " << batch << std::endl;
  return 0;
}

// --kubernetes: writes <output_dir>/kubernetes/p3.yaml.
int GenerateKubernetes(const LauncherOptions& options, ExperimentConfig config) {
  fs::path out(config.output_dir());
  if (out.is_relative()) out = fs::path(options.working_dir) / out;
  out = out.lexically_normal();
  // Inside the pods every process writes under the mounted output volume.
  config.set_output_dir("/var/p3/out");
  KubernetesOptions kube;
  kube.image = absl::GetFlag(FLAGS_kube_image);
  kube.kube_namespace = absl::GetFlag(FLAGS_kube_namespace);
  const std::string bin_dir = absl::GetFlag(FLAGS_kube_binary_dir);
  kube.server_binary = bin_dir + "/p3_server";
  kube.worker_binary = bin_dir + "/p3_worker";
  if (options.server_port > 0) kube.server_port = options.server_port;
  kube.output_claim = absl::GetFlag(FLAGS_kube_output_claim);
  std::error_code error;
  fs::create_directories(out / "kubernetes", error);
  const std::string path = (out / "kubernetes" / "p3.yaml").string();
  absl::Status status = WriteFileAtomically(
      path,
      KubernetesManifests(config, ResolvedConfigText(options, config, "for Kubernetes"), kube));
  if (!status.ok()) {
    std::cerr << "launch_cluster: " << status.message() << "\n";
    return 1;
  }
  const std::string job = absl::StrCat("p3-", KubernetesName(config.name()), "-worker");
  std::cout << "[p3] wrote " << path << "\n"
            << "[p3] run:     kubectl apply -f " << path << "\n"
            << "[p3] wait:    kubectl wait --for=condition=complete --timeout=24h job/" << job
            << "\n"
            << "[p3] progress: kubectl logs -f job/" << job << "   (rank 0's pod)\n"
            << "[p3] clean up: kubectl delete -f " << path << std::endl;
  return 0;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args(argv, argv + argc);
  std::vector<std::string> overrides = ExtractSetFlags(args);
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() > 1) {
    std::cerr << "launch_cluster: unexpected argument \"" << positional[1]
              << "\"; config fields are set with --set=field.path=value\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_cleanup_network)) return CleanupNetwork();

  // Set by `bazel run`: the directory it was invoked from. Flags are read here, in main,
  // and passed on as options.
  const char* invocation_env = std::getenv("BUILD_WORKING_DIRECTORY");
  const std::string invocation_dir = invocation_env != nullptr ? invocation_env : "";
  std::error_code error;
  LauncherOptions options;
  options.overrides = overrides;
  options.config_path = ResolveInputPath(absl::GetFlag(FLAGS_config), invocation_dir);
  options.server_binary = ResolveInputPath(absl::GetFlag(FLAGS_server_binary), invocation_dir);
  options.worker_binary = ResolveInputPath(absl::GetFlag(FLAGS_worker_binary), invocation_dir);
  options.working_dir = !invocation_dir.empty() ? invocation_dir : fs::current_path(error).string();
  options.kill_grace = absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_kill_grace_s)));
  options.log_tail_lines = std::max(1, absl::GetFlag(FLAGS_log_tail_lines));
  options.live_progress = isatty(STDOUT_FILENO) == 1;
  options.server_port = absl::GetFlag(FLAGS_server_port);
  options.remote_output_dir = absl::GetFlag(FLAGS_remote_output_dir);
  options.check_network_only = absl::GetFlag(FLAGS_check_network);
  options.ssh_command = absl::StrSplit(absl::GetFlag(FLAGS_ssh), ' ', absl::SkipEmpty());
  if (options.server_port < 0 || options.server_port + config::kMaxProcesses > 65535) {
    std::cerr << "launch_cluster: --server_port=" << options.server_port
              << " is out of range; allowed 0 (OS-chosen ports) or 1.."
              << 65535 - config::kMaxProcesses << "\n";
    return 2;
  }
  const std::string collect_dir = absl::GetFlag(FLAGS_collect);
  if (!collect_dir.empty()) {
    // The folder's own resolved config describes the run.
    fs::path dir = ResolveInputPath(collect_dir, invocation_dir);
    options.config_path = (dir / "config.textproto").string();
  }
  const std::string hosts_flag = absl::GetFlag(FLAGS_hosts);
  if (!hosts_flag.empty()) {
    const std::string path = ResolveInputPath(hosts_flag, invocation_dir);
    absl::StatusOr<std::string> text = ReadFile(path);
    absl::StatusOr<std::vector<Host>> hosts =
        text.ok() ? ParseHostFile(*text) : absl::StatusOr<std::vector<Host>>(text.status());
    if (!hosts.ok()) {
      std::cerr << "launch_cluster: --hosts=" << path << ": " << hosts.status().message() << "\n";
      return 2;
    }
    options.hosts = *std::move(hosts);
    if (options.ssh_command.empty()) {
      std::cerr << "launch_cluster: --ssh is empty\n";
      return 2;
    }
  }
  if (!options.remote_output_dir.empty() && (options.hosts.empty() || options.server_port == 0 ||
                                             !fs::path(options.remote_output_dir).is_absolute())) {
    std::cerr << "launch_cluster: --remote_output_dir needs --hosts and --server_port (the "
                 "launcher cannot read port files on other hosts) and an absolute path\n";
    return 2;
  }

  // Everything is checked before any process starts.
  absl::StatusOr<ExperimentConfig> config = config::LoadConfig(options.config_path, overrides);
  if (!config.ok()) {
    std::cerr << "launch_cluster: invalid config:\n" << config.status().message() << "\n";
    return 2;
  }
  if (!collect_dir.empty()) {
    config->set_output_dir(ResolveInputPath(collect_dir, invocation_dir));
    Launcher launcher(std::move(options), *std::move(config));
    return launcher.Collect();
  }
  const bool emulate = config->network().bandwidth_gbps() > 0;
  const bool kubernetes = absl::GetFlag(FLAGS_kubernetes);
  const bool slurm = absl::GetFlag(FLAGS_slurm);
  if (emulate && (!options.hosts.empty() || kubernetes || slurm)) {
    std::cerr << "launch_cluster: network.bandwidth_gbps = " << config->network().bandwidth_gbps()
              << " emulates links on this machine; with "
              << (kubernetes ? "--kubernetes"
                  : slurm    ? "--slurm"
                             : "--hosts")
              << " the hosts' own network is used: set network.bandwidth_gbps=0\n";
    return 2;
  }
  if (kubernetes) return GenerateKubernetes(options, *config);
  if (slurm) {
    return GenerateSlurm(options, *config,
                         ResolveInputPath(absl::GetFlag(FLAGS_slurm_task_script), invocation_dir));
  }
  if (options.check_network_only && !emulate) {
    std::cerr << "launch_cluster: --check_network: the config emulates no network "
                 "(network.bandwidth_gbps is 0); e.g. --set=network.bandwidth_gbps=1\n";
    return 2;
  }
  if ((config::NetworkEmulated(*config) || options.check_network_only) && geteuid() != 0) {
    std::cerr << "launch_cluster: network.bandwidth_gbps = " << config->network().bandwidth_gbps()
              << ": emulating the network needs root (it creates network namespaces, veth "
                 "links and tbf qdiscs); run the launcher as root (e.g. sudo), or set "
                 "network.bandwidth_gbps=0 to run without emulation (every process on this "
                 "machine's loopback)\n";
    return 2;
  }
  if (!options.check_network_only && options.hosts.empty()) {
    for (const auto& [flag, path, needed] :
         {std::make_tuple("--server_binary", options.server_binary,
                          config::ServerProcessCount(*config) > 0),
          std::make_tuple("--worker_binary", options.worker_binary, true)}) {
      if (needed && access(path.c_str(), X_OK) != 0) {
        std::cerr << "launch_cluster: " << flag << ": " << path << " is not an executable file ("
                  << std::strerror(errno) << "); build it (and list it in the launcher's data to "
                  << "find it under bazel run) or pass " << flag << "=PATH\n";
        return 2;
      }
    }
  }

  // Signals arrive through a signalfd read by the poll loop; children restore the
  // original mask before exec.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, sig);
  sigset_t original_mask;
  sigprocmask(SIG_BLOCK, &handled, &original_mask);
  const int signal_fd = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) {
    std::cerr << "launch_cluster: signalfd: " << std::strerror(errno) << "\n";
    return 1;
  }
  const bool check_only = options.check_network_only;
  Launcher launcher(std::move(options), *std::move(config));
  if (check_only) return launcher.CheckNetworkOnly(original_mask, signal_fd);
  return launcher.Run(original_mask, signal_fd);
}

}  // namespace
}  // namespace p3::tools

int main(int argc, char** argv) { return p3::tools::Main(argc, argv); }
