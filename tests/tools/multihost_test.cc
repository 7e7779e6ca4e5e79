// Tests of tools/launcher/multihost.h: host files, shell quoting, the script that runs a process
// over ssh (run here with a local sh), and key lines of the Slurm batch script and the
// Kubernetes manifests.
#include "tools/launcher/multihost.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "p3/base/allocator.h"
#include "proto/config.h"
#include "tools/launcher/worker_program.h"

namespace p3::tools {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(base != nullptr ? base : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

struct ShellResult {
  int status = -1;  // Exit status, or 128 + signal.
  double seconds = 0;
};

// The descriptor on which a script run by RunShell says it is ready: `echo >&9`.
constexpr int kReadyFd = 9;

// Runs `sh -c script` with a pipe as stdin (standing for the ssh connection) and waits
// for the shell. With `close_when_ready`, the pipe is closed as soon as the script has
// written a line to descriptor kReadyFd, else only once the shell has exited (as the
// launcher keeps it open while the process runs).
ShellResult RunShell(const std::string& script, bool close_when_ready = false) {
  int in[2];
  int ready[2];
  if (pipe2(in, O_CLOEXEC) != 0) return {};
  if (pipe2(ready, O_CLOEXEC) != 0) return {};
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    // dup2 clears close-on-exec on the copies; the originals close at exec.
    dup2(in[0], STDIN_FILENO);
    dup2(ready[1], kReadyFd);
    fcntl(kReadyFd, F_SETFD, 0);  // Also when ready[1] already was kReadyFd.
    execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
    _exit(127);
  }
  close(in[0]);
  close(ready[1]);
  if (close_when_ready) {
    // Until the first newline, or end of file once every copy of the write end closed.
    // Bounded: a script that never says it is ready fails its test instead of hanging.
    const auto deadline = start + std::chrono::seconds(10);
    pollfd readable = {ready[0], POLLIN, 0};
    char c = 0;
    while (c != '\n') {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || poll(&readable, 1, static_cast<int>(left.count())) <= 0 ||
          read(ready[0], &c, 1) != 1) {
        break;
      }
    }
    close(in[1]);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!close_when_ready) close(in[1]);
  close(ready[0]);
  ShellResult result;
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

int Occurrences(const std::string& text, const std::string& part) {
  int count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

config::ExperimentConfig Config(const std::string& text) {
  absl::StatusOr<config::ExperimentConfig> config = config::ParseConfig(text, {});
  CATCH_REQUIRE(config.ok());
  return *config;
}

CATCH_TEST_CASE("a host file gives ssh destinations and the addresses servers bind") {
  absl::StatusOr<std::vector<Host>> hosts = ParseHostFile(
      "# workers and servers, one machine per line\n"
      "alice@node1   10.0.0.1   # explicit address\n"
      "\n"
      "node2\n"
      "  bob@node3.example.org\t\n");
  CATCH_REQUIRE(hosts.ok());
  CATCH_REQUIRE(hosts->size() == 3);
  CATCH_CHECK((*hosts)[0].destination == "alice@node1");
  CATCH_CHECK((*hosts)[0].address == "10.0.0.1");
  CATCH_CHECK((*hosts)[1].address == "node2");
  CATCH_CHECK((*hosts)[2].destination == "bob@node3.example.org");
  CATCH_CHECK((*hosts)[2].address == "node3.example.org");

  absl::StatusOr<std::vector<Host>> extra = ParseHostFile("node1\nnode2 10.0.0.2 extra\n");
  CATCH_REQUIRE(!extra.ok());
  CATCH_CHECK(absl::StrContains(extra.status().message(), "line 2: expected"));
  absl::StatusOr<std::vector<Host>> bad = ParseHostFile("node1;rm -rf /\n");
  CATCH_REQUIRE(!bad.ok());
  CATCH_CHECK(absl::StrContains(bad.status().message(), "line 1:"));
  CATCH_CHECK(!ParseHostFile("# nothing\n\n").ok());
}

CATCH_TEST_CASE("shell quoting survives the shell, quotes and all") {
  for (const std::string text :
       {"plain", "with space", "it's", "'", "$HOME `id` \"x\" \\n", "multi\nline", ""}) {
    CATCH_CAPTURE(text);
    const std::string dir = TempDir("quote");
    const std::string out = dir + "/out";
    const ShellResult result =
        RunShell(absl::StrCat("printf '%s' ", ShellQuote(text), " > ", ShellQuote(out)));
    CATCH_CHECK(result.status == 0);
    CATCH_CHECK(ReadFile(out) == text);
  }
  CATCH_CHECK(ShellCommand({"/bin/p3_worker", "--rank=0", "--set=name=a b"}) ==
              "/bin/p3_worker --rank=0 '--set=name=a b'");
}

CATCH_TEST_CASE("ssh gets batch mode, the destination and one sh -c command") {
  const std::vector<std::string> argv =
      SshArgv({"ssh", "-F", "cfg"}, Host{"alice@node1", "10.0.0.1"}, "echo 'hi'");
  CATCH_CHECK(argv == std::vector<std::string>{"ssh", "-F", "cfg", "-o", "BatchMode=yes",
                                               "alice@node1", "sh -c 'echo '\\''hi'\\'''"});
}

CATCH_TEST_CASE("the remote script prepares the host, runs the process and keeps its status") {
  const std::string dir = TempDir("remote");
  RemoteProcess process;
  process.directories = {dir + "/out/logs", dir + "/out/results"};
  process.config_text = "name: \"it's\"\n# 100% text\n";
  process.config_path = dir + "/out/config.textproto";
  process.working_directory = dir;
  process.argv = {"/bin/sh", "-c", "pwd > where; exit 7"};
  process.tag = "worker_0";
  const ShellResult result = RunShell(RemoteScript(process));
  CATCH_CHECK(result.status == 7);
  CATCH_CHECK(fs::is_directory(dir + "/out/logs"));
  CATCH_CHECK(fs::is_directory(dir + "/out/results"));
  CATCH_CHECK(ReadFile(process.config_path) == process.config_text);
  CATCH_CHECK(!fs::exists(process.config_path + ".worker_0.tmp"));
  CATCH_CHECK(ReadFile(dir + "/where") == dir + "\n");
}

CATCH_TEST_CASE("the remote script exports the process's environment, quoted") {
  const std::string dir = TempDir("remote_env");
  RemoteProcess process;
  process.working_directory = dir;
  process.argv = {"/bin/sh", "-c", "printf '%s|%s' \"$GLIBC_TUNABLES\" \"$P3_NOTE\" > env"};
  process.environment = {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"},
                         {"P3_NOTE", "it's $HOME; `x`"}};
  const std::string script = RemoteScript(process);
  CATCH_CHECK(absl::StrContains(script, "\nexport GLIBC_TUNABLES='glibc.malloc.hugetlb=1'\n"));
  CATCH_CHECK(RunShell(script).status == 0);
  CATCH_CHECK(ReadFile(dir + "/env") == "glibc.malloc.hugetlb=1|it's $HOME; `x`");
  process.environment.clear();
  CATCH_CHECK_FALSE(absl::StrContains(RemoteScript(process), "export "));
}

// The launcher's chain: RequestHugePageHeapForChildren() (launch_cluster's first step),
// then ForwardedEnvironment() for the processes on other hosts.
std::string ForwardedAfterHugePageRequest(const char* user_tunables) {
  if (user_tunables == nullptr) {
    unsetenv("GLIBC_TUNABLES");
  } else {
    setenv("GLIBC_TUNABLES", user_tunables, 1);
  }
  CATCH_REQUIRE(RequestHugePageHeapForChildren().ok());
  RemoteProcess process;
  process.argv = {"p3_worker"};
  process.environment = ForwardedEnvironment();
  unsetenv("GLIBC_TUNABLES");
  return RemoteScript(process);
}

CATCH_TEST_CASE("processes on other hosts get the heap in huge pages, or the user's setting") {
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::string saved = before != nullptr ? before : "";
  const bool was_set = before != nullptr;
  CATCH_CHECK(absl::StrContains(ForwardedAfterHugePageRequest(nullptr),
                                "\nexport GLIBC_TUNABLES='glibc.malloc.hugetlb=1'\n"));
  // The user's =0 is what goes; other tunables are kept.
  const std::string off = ForwardedAfterHugePageRequest("glibc.malloc.hugetlb=0");
  CATCH_CHECK(absl::StrContains(off, "\nexport GLIBC_TUNABLES='glibc.malloc.hugetlb=0'\n"));
  CATCH_CHECK_FALSE(absl::StrContains(off, "hugetlb=1"));
  CATCH_CHECK(absl::StrContains(
      ForwardedAfterHugePageRequest("glibc.malloc.mmap_max=0"),
      "\nexport GLIBC_TUNABLES='glibc.malloc.mmap_max=0:glibc.malloc.hugetlb=1'\n"));
  // Nothing set, nothing forwarded.
  CATCH_CHECK(ForwardedEnvironment().empty());
  if (was_set) setenv("GLIBC_TUNABLES", saved.c_str(), 1);
}

CATCH_TEST_CASE("when ssh's stdin closes, the remote process gets SIGTERM") {
  const std::string dir = TempDir("watchdog");
  RemoteProcess process;
  process.working_directory = dir;
  // Stands for a server: runs until stopped, and says how it was stopped. It says it is
  // ready once its handler is in place; only then does the "connection" close.
  process.argv = {"/bin/sh", "-c",
                  "trap 'kill $s; echo terminated > stopped; exit 143' TERM; "
                  "sleep 60 9>&- & s=$!; echo ready >&9; exec 9>&-; wait $s"};
  const ShellResult result = RunShell(RemoteScript(process), /*close_when_ready=*/true);
  CATCH_CHECK(result.status == 143);
  CATCH_CHECK(result.seconds < 5);
  CATCH_CHECK(ReadFile(dir + "/stopped") == "terminated\n");
}

CATCH_TEST_CASE("when ssh's stdin closes, a process without children gets SIGTERM too") {
  // The watchdog lists the process's children (pgrep -P), which finds none here;
  // under the script's `set -e` that must not end the watchdog before the process.
  RemoteProcess process;
  process.working_directory = TempDir("childless");
  process.argv = {"/bin/sh", "-c", "echo ready >&9; exec 9>&-; exec sleep 30"};
  const ShellResult result = RunShell(RemoteScript(process), /*close_when_ready=*/true);
  CATCH_CHECK(result.status == 128 + SIGTERM);
  CATCH_CHECK(result.seconds < 5);
}

CATCH_TEST_CASE("when ssh's stdin closes, the children of a shell that does not exec stop") {
  // A worker program: /bin/sh -c <command> runs the command as its child (dash does not
  // exec it); SIGTERM to the shell alone would leave the program running.
  const std::string dir = TempDir("shell_child");
  RemoteProcess process;
  process.working_directory = dir;
  process.argv = {"/bin/sh", "-c",
                  "sh -c 'trap \"echo terminated > stopped; exit 143\" TERM; "
                  "sleep 30 9>&- & s=$!; echo ready >&9; exec 9>&-; wait $s'; echo after"};
  const ShellResult result = RunShell(RemoteScript(process), /*close_when_ready=*/true);
  CATCH_CHECK(result.seconds < 5);
  // The child writes its file as it stops, moments after the shell ended.
  for (int i = 0; i < 50 && !fs::exists(dir + "/stopped"); ++i) usleep(100000);
  CATCH_CHECK(ReadFile(dir + "/stopped") == "terminated\n");
}

CATCH_TEST_CASE("Kubernetes names are DNS-1123 labels") {
  CATCH_CHECK(KubernetesName("My_Run.2") == "my-run-2");
  CATCH_CHECK(KubernetesName("__") == "experiment");
  CATCH_CHECK(KubernetesName(std::string(60, 'a')).size() == 40);
}

CATCH_TEST_CASE("the Slurm script starts machines x tasks-per-node tasks in blocks") {
  const config::ExperimentConfig config =
      Config("name: \"exp_1\" cluster { workers: 4 servers: 2 } trace: true");
  CATCH_CHECK(config::MachineCount(config) == 4);
  // Machines 0 and 1 host a worker and a server each.
  CATCH_CHECK(SlurmTasksPerNode(config, 4) == 2);
  SlurmOptions options;
  options.server_binary = "/shared/bin/p3_server";
  options.worker_binary = "/shared/bin/p3_worker";
  options.launcher = "/shared/bin/launch_cluster";
  options.task_script = "/shared/out/slurm/p3_slurm_task.sh";
  options.output_dir = "/shared/out";
  options.partition = "gpu";
  options.time_limit = "01:00:00";
  const std::string script = SlurmBatchScript(config, options);
  for (const char* line : {
           "#!/bin/bash\n",
           "\n#SBATCH --job-name=p3-exp-1\n",
           "\n#SBATCH --nodes=4\n",
           "\n#SBATCH --ntasks=8\n",
           "\n#SBATCH --ntasks-per-node=2\n",
           "\n#SBATCH --partition=gpu\n",
           "\n#SBATCH --time=01:00:00\n",
           "\nsrun --ntasks=8 --ntasks-per-node=2 --distribution=block --kill-on-bad-exit=1 \\\n",
           "    --workers=4 --servers=2 --machines=4 --tasks_per_node=2 --placement=colocated \\\n",
           "    --peer_timeout_s=60 --trace \\\n",
           "    --server_binary='/shared/bin/p3_server' \\\n",
           "\n'/shared/bin/launch_cluster' --collect=\"$OUT\" || collect_status=$?\n",
           "\nexit $((srun_status != 0 ? srun_status : collect_status))\n",
       }) {
    CATCH_CAPTURE(line);
    CATCH_CHECK(absl::StrContains(script, line));
  }
  // The #SBATCH lines must come before the first command.
  CATCH_CHECK(script.rfind("#SBATCH") < script.find("set -euo pipefail"));
  CATCH_CHECK_FALSE(absl::StrContains(script, "--max_restarts"));
  options.max_restarts = 2;
  CATCH_CHECK(absl::StrContains(SlurmBatchScript(config, options),
                                "    --peer_timeout_s=60 --trace --max_restarts=2 \\\n"));
  CATCH_CHECK_FALSE(absl::StrContains(script, "export "));
}

CATCH_TEST_CASE("the Slurm script exports the launcher's variables before srun") {
  SlurmOptions options;
  options.output_dir = "/shared/out";
  options.environment = {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}};
  const std::string script = SlurmBatchScript(Config(""), options);
  const size_t exported = script.find("\nexport GLIBC_TUNABLES='glibc.malloc.hugetlb=1'\n");
  CATCH_REQUIRE(exported != std::string::npos);
  // srun passes the batch script's environment on to the tasks.
  CATCH_CHECK(exported < script.find("\nsrun "));
}

CATCH_TEST_CASE("Kubernetes: a StatefulSet of servers behind a headless Service, an Indexed Job") {
  const config::ExperimentConfig config =
      Config("name: \"Exp\" cluster { workers: 3 servers: 2 } trace: true");
  KubernetesOptions options;
  options.image = "registry.example/p3:1.0";
  options.kube_namespace = "ml";
  options.server_port = 6000;
  options.output_claim = "p3-results";
  const std::string yaml = KubernetesManifests(config, "name: \"Exp\"\n\nmode: \"p3\"\n", options);
  for (const char* line : {
           "\nkind: ConfigMap\nmetadata:\n  name: p3-exp-config\n  namespace: ml\n",
           "\n  config.textproto: |\n    name: \"Exp\"\n\n    mode: \"p3\"\n",
           "\nkind: Service\nmetadata:\n  name: p3-exp-servers\n",
           "\n  clusterIP: None\n",
           "\nkind: StatefulSet\nmetadata:\n  name: p3-exp-server\n",
           "\n  serviceName: p3-exp-servers\n  replicas: 2\n",
           "i=\"${HOSTNAME##*-}\"",
           "/opt/p3/p3_server --config=/etc/p3/config.textproto --server_index=\"$i\" --port=6000 "
           "--set=cluster.host=0.0.0.0",
           "--trace_file=/var/p3/out/traces/server_$i.json",
           "\nkind: Job\nmetadata:\n  name: p3-exp-worker\n",
           "\n  completionMode: Indexed\n  completions: 3\n  parallelism: 3\n",
           "r=\"$JOB_COMPLETION_INDEX\"",
           "--rank=\"$r\" --servers=p3-exp-server-0.p3-exp-servers:6000,"
           "p3-exp-server-1.p3-exp-servers:6000 --result_file=/var/p3/out/results/worker_$r.json",
           "\n        image: \"registry.example/p3:1.0\"\n",
           "\n          claimName: p3-results\n",
       }) {
    CATCH_CAPTURE(line);
    CATCH_CHECK(absl::StrContains(yaml, line));
  }
}

CATCH_TEST_CASE("Kubernetes with restarts: a failed worker container restarts and rejoins") {
  const config::ExperimentConfig config =
      Config("name: \"Exp\" cluster { workers: 2 servers: 1 }");
  KubernetesOptions options;
  const std::string without = KubernetesManifests(config, "name: \"Exp\"\n", options);
  CATCH_CHECK(absl::StrContains(without, "\n  backoffLimit: 0\n"));
  CATCH_CHECK(absl::StrContains(without, "\n      restartPolicy: Never\n"));
  CATCH_CHECK_FALSE(absl::StrContains(without, "rejoin"));
  options.max_restarts = 3;
  const std::string yaml = KubernetesManifests(config, "name: \"Exp\"\n", options);
  for (const char* line : {
           "\n  backoffLimit: 3\n",
           "\n      restartPolicy: OnFailure\n",
           "\n          [ -e /var/p3/state/started ] && rejoin=\"--rejoin\"\n"
           "          touch /var/p3/state/started\n",
           "--records_file=/var/p3/out/records/worker_$r.csv $rejoin\n",
           "\n        - name: state\n          mountPath: /var/p3/state\n",
           "\n      - name: state\n        emptyDir: {}\n",
       }) {
    CATCH_CAPTURE(line);
    CATCH_CHECK(absl::StrContains(yaml, line));
  }
  // Workers only: no checkpoint volume on the servers.
  CATCH_CHECK_FALSE(absl::StrContains(yaml, "checkpoints"));
}

CATCH_TEST_CASE("Kubernetes with restarts and checkpoints: servers mount one shared volume") {
  const config::ExperimentConfig config =
      Config("name: \"Exp\" cluster { workers: 2 servers: 2 }");
  KubernetesOptions options;
  options.max_restarts = 3;
  options.checkpoint_claim = "p3-ckpt";
  const std::string yaml = KubernetesManifests(config, "name: \"Exp\"\n", options);
  const size_t statefulset = yaml.find("\nkind: StatefulSet\n");
  const size_t job = yaml.find("\nkind: Job\n");
  CATCH_REQUIRE(statefulset != std::string::npos);
  CATCH_REQUIRE(job != std::string::npos);
  const std::string servers = yaml.substr(statefulset, job - statefulset);
  const std::string workers = yaml.substr(job);
  for (const char* line : {
           "\n        - name: checkpoints\n          mountPath: /var/p3/checkpoints\n",
           "\n      - name: checkpoints\n        persistentVolumeClaim:\n"
           "          claimName: p3-ckpt\n",
           "newest checkpoint\n",
       }) {
    CATCH_CAPTURE(line);
    CATCH_CHECK(absl::StrContains(servers, line));
  }
  // The StatefulSet's pods restart (Always, the only policy it allows): none is written.
  CATCH_CHECK_FALSE(absl::StrContains(servers, "restartPolicy:"));
  CATCH_CHECK_FALSE(absl::StrContains(workers, "checkpoints"));
  // A server's restart makes every worker fail once or twice: 2 x workers per restart.
  CATCH_CHECK(absl::StrContains(workers, "\n  backoffLimit: 12\n"));
  CATCH_CHECK(absl::StrContains(workers, "\n      restartPolicy: OnFailure\n"));
}

CATCH_TEST_CASE("worker.command: the batch script hands it to the task script, quoted") {
  const config::ExperimentConfig config =
      Config("worker { command: \"python3 train.py --note 'it s'\" }");
  SlurmOptions options;
  options.server_binary = "/opt/p3/p3_server";
  options.worker_binary = "/opt/p3/p3_worker";
  options.launcher = "/opt/p3/launch_cluster";
  options.task_script = "/shared/out/slurm/p3_slurm_task.sh";
  options.output_dir = "/shared/out";
  const std::string script = SlurmBatchScript(config, options);
  CATCH_CHECK(absl::StrContains(
      script, R"(    '--worker_command=python3 train.py --note '\''it s'\''' || srun_status=$?)"));
  CATCH_CHECK(!absl::StrContains(SlurmBatchScript(Config(""), options), "--worker_command"));
}

CATCH_TEST_CASE("Kubernetes: every container gets the launcher's variables") {
  KubernetesOptions options;
  options.environment = {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}};
  const std::string entry =
      "        - name: GLIBC_TUNABLES\n          value: \"glibc.malloc.hugetlb=1\"\n";
  for (const char* text : {"", "worker { command: \"python3 train.py\" }"}) {
    CATCH_CAPTURE(text);
    const std::string yaml = KubernetesManifests(Config(text), "", options);
    // One env list per container (the server's, the worker's), each with the variable.
    CATCH_CHECK(Occurrences(yaml, "        env:\n") == 2);
    CATCH_CHECK(Occurrences(yaml, entry) == 2);
  }
  CATCH_CHECK_FALSE(
      absl::StrContains(KubernetesManifests(Config(""), "", KubernetesOptions()), "env:"));
}

CATCH_TEST_CASE("worker.command on Kubernetes: the command in the container's environment") {
  const config::ExperimentConfig config =
      Config(R"(name: "w" trace: true worker { command: "python3 \"a b\".py" })");
  const std::string yaml = KubernetesManifests(config, "name: \"w\"\n", KubernetesOptions());
  CATCH_CHECK(absl::StrContains(yaml,
                                "        env:\n        - name: P3_WORKER_COMMAND\n"
                                R"(          value: "python3 \"a b\".py")" "\n"));
  CATCH_CHECK(absl::StrContains(yaml, "          exec /bin/sh -c \"$P3_WORKER_COMMAND\"\n"));
  CATCH_CHECK(absl::StrContains(yaml, "P3_TRACE_FILE=/var/p3/out/traces/worker_$r.json"));
  CATCH_CHECK(absl::StrContains(yaml, "P3_REJOIN=\"$rejoin\""));
  CATCH_CHECK(!absl::StrContains(yaml, "/opt/p3/p3_worker"));
  for (const char* name : kWorkerProgramVariables) {
    CATCH_CAPTURE(name);
    CATCH_CHECK(absl::StrContains(yaml, absl::StrCat(name, "=")));
  }
}

}  // namespace
}  // namespace p3::tools
