#include "tools/launcher/multihost.h"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/config.h"

namespace p3::tools {
namespace {

bool OnlyChars(absl::string_view text, absl::string_view extra) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        extra.find(c) == absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

// `text` with every line indented by `indent` spaces (YAML block scalars).
std::string Indent(absl::string_view text, int indent) {
  const std::string pad(indent, ' ');
  std::string out;
  for (absl::string_view line : absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), '\n')) {
    absl::StrAppend(&out, line.empty() ? "" : pad, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return out;
}

// A YAML double-quoted scalar: a JSON string is one (YAML 1.2 is a superset of JSON), and
// nlohmann/json escapes quotes, backslashes and control characters.
std::string YamlString(absl::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

absl::StatusOr<std::vector<Host>> ParseHostFile(absl::string_view text) {
  std::vector<Host> hosts;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    if (words.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": expected `<ssh destination> [<address>]`, got ",
                       words.size(), " words"));
    }
    Host host;
    host.destination = std::string(words[0]);
    if (!OnlyChars(host.destination, "@._-:[]")) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": \"", host.destination,
                       "\" is not an ssh destination (host, user@host or an ssh alias)"));
    }
    const size_t at = host.destination.rfind('@');
    host.address = words.size() == 2 ? std::string(words[1])
                                     : (at == std::string::npos ? host.destination
                                                                : host.destination.substr(at + 1));
    if (!OnlyChars(host.address, "._-:")) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, ": \"", host.address,
                                                     "\" is not a host name or IP address"));
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) return absl::InvalidArgumentError("no hosts (one per line)");
  return hosts;
}

Environment ForwardedEnvironment() {
  Environment environment;
  for (const char* name : kForwardedVariables) {
    if (const char* value = std::getenv(name); value != nullptr) {
      environment.emplace_back(name, value);
    }
  }
  return environment;
}

std::string ShellExports(const Environment& environment) {
  std::string lines;
  for (const auto& [name, value] : environment) {
    absl::StrAppend(&lines, "export ", name, "=", ShellQuote(value), "\n");
  }
  return lines;
}

std::string ShellQuote(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

std::string ShellCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  for (const std::string& arg : argv) {
    // Plain words stay readable; anything else is quoted.
    words.push_back(OnlyChars(arg, "-_./=:,@+%") ? arg : ShellQuote(arg));
  }
  return absl::StrJoin(words, " ");
}

std::vector<std::string> SshArgv(const std::vector<std::string>& ssh_command, const Host& host,
                                 const std::string& script) {
  std::vector<std::string> argv = ssh_command;
  argv.insert(argv.end(), {"-o", "BatchMode=yes", host.destination,
                           absl::StrCat("sh -c ", ShellQuote(script))});
  return argv;
}

std::string RemoteScript(const RemoteProcess& process) {
  std::vector<std::string> dirs;
  for (const std::string& dir : process.directories) dirs.push_back(ShellQuote(dir));
  const std::string tmp = absl::StrCat(process.config_path, ".", process.tag, ".tmp");
  std::string script = "set -e\n";
  if (!dirs.empty()) absl::StrAppend(&script, "mkdir -p ", absl::StrJoin(dirs, " "), "\n");
  if (!process.config_path.empty()) {
    absl::StrAppend(&script, "printf '%s' ", ShellQuote(process.config_text), " > ",
                    ShellQuote(tmp), "\n", "mv -f ", ShellQuote(tmp), " ",
                    ShellQuote(process.config_path), "\n");
  }
  absl::StrAppend(&script, "cd ", ShellQuote(process.working_directory), " 2>/dev/null || cd /\n",
                  ShellExports(process.environment),
                  // The process must not read the connection; the watchdog does.
                  "exec 3<&0\n", ShellCommand(process.argv), " </dev/null &\n", "pid=$!\n",
                  // EOF on stdin: ssh ended (stopped by the launcher, or the launcher died).
                  // The process, then the children it had: a worker program's
                  // `/bin/sh -c` does not exec the command it runs, and dies of SIGTERM
                  // without passing it on. The children are listed before the process is
                  // signalled (after, they would belong to init), and signalled after it,
                  // so that a process that handles SIGTERM itself (a server, a trap)
                  // still gets it first. pgrep is procps'; without it, only the process.
                  // `|| :`: the subshell runs under `set -e`, and pgrep fails when the
                  // process has no children.
                  "( cat <&3 >/dev/null 2>&1; kids=$(pgrep -P \"$pid\" 2>/dev/null || :); "
                  "kill -TERM \"$pid\" 2>/dev/null || :; "
                  "[ -z \"$kids\" ] || kill -TERM $kids 2>/dev/null || : ) "
                  ">/dev/null 2>&1 &\n",
                  "exec 3<&-\n", "set +e\n", "wait \"$pid\"\n", "exit $?\n");
  return script;
}

std::string KubernetesName(absl::string_view name) {
  std::string out;
  for (char c : name) {
    const char lower = absl::ascii_tolower(static_cast<unsigned char>(c));
    out += absl::ascii_isalnum(static_cast<unsigned char>(lower)) ? lower : '-';
  }
  if (out.size() > 40) out.resize(40);
  while (!out.empty() && out.back() == '-') out.pop_back();
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  return out.empty() ? "experiment" : out;
}

int SlurmTasksPerNode(const config::ExperimentConfig& config, int machines) {
  std::vector<int> per_machine(std::max(1, machines), 0);
  for (int i = 0; i < config::ServerProcessCount(config); ++i) {
    ++per_machine[config::ServerMachine(config, i, machines)];
  }
  for (int r = 0; r < config::WorkerProcessCount(config); ++r) {
    ++per_machine[config::WorkerMachine(config, r, machines)];
  }
  return std::max(1, *std::max_element(per_machine.begin(), per_machine.end()));
}

std::string SlurmBatchScript(const config::ExperimentConfig& config, const SlurmOptions& options) {
  const int machines = config::MachineCount(config);
  const int per_node = SlurmTasksPerNode(config, machines);
  const int tasks = machines * per_node;
  const std::string& out = options.output_dir;
  std::string script = absl::StrCat(
      "#!/bin/bash\n",
      "# Generated by launch_cluster --slurm (docs/multihost.md). Submit with: sbatch ", out,
      "/slurm/p3.sbatch\n", "# ", config.cluster().servers(), " server(s) and ",
      config.cluster().workers(), " worker(s) on ", machines, " node(s), placement \"",
      config.network().placement().empty() ? "colocated" : config.network().placement(), "\", ",
      per_node, " task(s) per node.\n", "#SBATCH --job-name=p3-", KubernetesName(config.name()),
      "\n", "#SBATCH --nodes=", machines, "\n", "#SBATCH --ntasks=", tasks, "\n",
      "#SBATCH --ntasks-per-node=", per_node, "\n", "#SBATCH --output=", out,
      "/logs/slurm-%j.out\n");
  if (!options.partition.empty()) {
    absl::StrAppend(&script, "#SBATCH --partition=", options.partition, "\n");
  }
  if (!options.time_limit.empty()) {
    absl::StrAppend(&script, "#SBATCH --time=", options.time_limit, "\n");
  }
  const std::string q_out = ShellQuote(out);
  absl::StrAppend(
      &script, "set -euo pipefail\n", "OUT=", q_out, "\n",
      "# Files of an earlier run must not be mistaken for this one's.\n",
      "rm -f \"$OUT\"/summary.json \"$OUT\"/trace.json \"$OUT\"/ports/* \"$OUT\"/results/* "
      "\"$OUT\"/records/* \"$OUT\"/traces/*\n",
      "mkdir -p \"$OUT\"/logs \"$OUT\"/ports \"$OUT\"/results \"$OUT\"/records \"$OUT\"/traces\n",
      options.environment.empty()
          ? ""
          : "# From launch_cluster's environment (docs/multihost.md); srun passes them on.\n",
      ShellExports(options.environment), "# Block distribution: task p runs on node p / ", per_node,
      "; the task script derives its role from SLURM_PROCID.\n", "srun_status=0\n",
      "srun --ntasks=", tasks, " --ntasks-per-node=", per_node,
      " --distribution=block --kill-on-bad-exit=1 \\\n", "  ", ShellQuote(options.task_script),
      " \\\n", "    --config=\"$OUT\"/config.textproto --output_dir=\"$OUT\" \\\n",
      "    --workers=", config::WorkerProcessCount(config),
      " --servers=", config::ServerProcessCount(config), " --machines=", machines,
      " --tasks_per_node=", per_node, " --placement=",
      config.network().placement().empty() ? "colocated" : config.network().placement(), " \\\n",
      "    --peer_timeout_s=", config.cluster().peer_timeout_s(), config.trace() ? " --trace" : "",
      options.max_restarts > 0 ? absl::StrCat(" --max_restarts=", options.max_restarts) : "",
      " \\\n", "    --server_binary=", ShellQuote(options.server_binary), " \\\n",
      "    --worker_binary=", ShellQuote(options.worker_binary),
      config.worker().has_command()
          ? absl::StrCat(" \\\n    ", ShellQuote("--worker_command=" + config.worker().command()))
          : "",
      " || srun_status=$?\n",
      "# summary.json (and trace.json) from the files the tasks wrote; after a failure too,\n",
      "# naming the process that failed first.\n", "collect_status=0\n",
      ShellQuote(options.launcher), " --collect=\"$OUT\" || collect_status=$?\n",
      "exit $((srun_status != 0 ? srun_status : collect_status))\n");
  return script;
}

std::string KubernetesManifests(const config::ExperimentConfig& config,
                                const std::string& config_text, const KubernetesOptions& options) {
  const std::string base = absl::StrCat("p3-", KubernetesName(config.name()));
  const std::string service = base + "-servers";
  const std::string statefulset = base + "-server";
  const std::string job = base + "-worker";
  const std::string config_map = base + "-config";
  const int servers = config::ServerProcessCount(config);
  const int workers = config::WorkerProcessCount(config);
  const std::string port = absl::StrCat(options.server_port);
  // Workers restarted in their pods rejoin the cluster (docs/multihost.md).
  const bool restart = options.max_restarts > 0;
  const std::string ns = options.kube_namespace.empty()
                             ? ""
                             : absl::StrCat("  namespace: ", options.kube_namespace, "\n");
  const std::string labels =
      absl::StrCat("    app.kubernetes.io/name: p3\n    p3/experiment: ", base, "\n");
  std::vector<std::string> addresses;
  for (int i = 0; i < servers; ++i) {
    addresses.push_back(absl::StrCat(statefulset, "-", i, ".", service, ":", port));
  }
  const std::string volume =
      options.output_claim.empty()
          ? "        emptyDir: {}\n"
          : absl::StrCat("        persistentVolumeClaim:\n          claimName: ",
                         options.output_claim, "\n");
  auto pod_volumes = [&]() {
    return absl::StrCat("      volumes:\n", "      - name: config\n", "        configMap:\n",
                        "          name: ", config_map, "\n", "      - name: out\n", volume);
  };
  const std::string mounts =
      "        volumeMounts:\n"
      "        - name: config\n"
      "          mountPath: /etc/p3\n"
      "          readOnly: true\n"
      "        - name: out\n"
      "          mountPath: /var/p3/out\n";
  // Servers restart from checkpoints: a volume every server pod sees.
  const bool checkpoints = restart && !options.checkpoint_claim.empty();
  // A worker's failure costs one restart of its container; a server's makes every worker
  // fail once, and once more when a worker meets the old and the restarted servers
  // before the old ones have stopped (docs/multihost.md).
  const int backoff_limit =
      std::max(0, options.max_restarts) * (checkpoints ? 2 * std::max(1, workers) : 1);
  const std::string server_mounts =
      checkpoints ? absl::StrCat(mounts, "        - name: checkpoints\n          mountPath: ",
                                 kKubeCheckpointDir, "\n")
                  : mounts;
  const std::string server_volumes =
      checkpoints ? absl::StrCat("      - name: checkpoints\n        persistentVolumeClaim:\n",
                                 "          claimName: ", options.checkpoint_claim, "\n")
                  : "";
  // The variables every container gets: the entries of an `env:` list.
  std::string env;
  for (const auto& [name, value] : options.environment) {
    absl::StrAppend(&env, "        - name: ", name, "\n          value: ", YamlString(value), "\n");
  }
  const std::string trace_server =
      config.trace() ? " --trace_file=/var/p3/out/traces/server_$i.json" : "";
  const std::string trace_worker =
      config.trace() ? " --trace_file=/var/p3/out/traces/worker_$r.json" : "";

  std::string yaml = absl::StrCat(
      "# Generated by launch_cluster --kubernetes (docs/multihost.md): experiment \"",
      config.name(), "\",\n# ", servers, " server(s) (StatefulSet ", statefulset,
      " behind headless Service ", service, "), ", workers, " worker(s) (Indexed Job ", job,
      ").\n# kubectl apply -f p3.yaml && kubectl wait --for=condition=complete --timeout=24h "
      "job/",
      job, "\n# kubectl delete -f p3.yaml   (the servers keep running until then)\n");
  // The resolved config.
  absl::StrAppend(&yaml, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ", config_map,
                  "\n", ns, "  labels:\n", labels, "data:\n  config.textproto: |\n",
                  Indent(config_text, 4));
  // Stable DNS names for the servers: <statefulset>-<i>.<service>.
  absl::StrAppend(&yaml, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: ", service, "\n",
                  ns, "  labels:\n", labels,
                  "spec:\n  clusterIP: None\n  publishNotReadyAddresses: true\n  selector:\n",
                  "    p3/experiment: ", base, "\n    p3/role: server\n", "  ports:\n",
                  "  - name: grpc\n    port: ", port, "\n");
  absl::StrAppend(
      &yaml, "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: ", statefulset, "\n",
      ns, "  labels:\n", labels, "spec:\n  serviceName: ", service, "\n  replicas: ", servers,
      "\n  podManagementPolicy: Parallel\n  selector:\n    matchLabels:\n      p3/experiment: ",
      base, "\n      p3/role: server\n  template:\n    metadata:\n      labels:\n",
      "        app.kubernetes.io/name: p3\n        p3/experiment: ", base,
      "\n        p3/role: server\n    spec:\n      containers:\n      - name: server\n",
      "        image: ", YamlString(options.image), "\n",
      "        command: [\"/bin/sh\", \"-c\"]\n        args:\n        - |\n", "          set -e\n",
      "          i=\"${HOSTNAME##*-}\"   # the pod ordinal = the server index\n",
      checkpoints ? "          # A failed server exits non-zero and is started again (restartPolicy "
                    "Always)\n          # with this same command: it resumes from the newest "
                    "checkpoint\n          # that every server has (checkpoint.resume_iteration "
                    "-1).\n"
                  : "",
      "          mkdir -p /var/p3/out/ports /var/p3/out/traces\n", "          ",
      options.server_binary,
      " --config=/etc/p3/config.textproto --server_index=\"$i\" --port=", port,
      " --set=cluster.host=0.0.0.0 --port_file=/var/p3/out/ports/server_$i.port", trace_server,
      "\n", "          # Done: stay up, or the StatefulSet would start the server again.\n",
      "          exec sleep infinity\n", env.empty() ? "" : "        env:\n", env,
      "        ports:\n        - name: grpc\n", "          containerPort: ", port, "\n",
      server_mounts, pod_volumes(), server_volumes);
  // The worker containers' command: p3_worker, or worker.command with the P3_*
  // environment (tools/launcher/worker_program.h).
  const bool program = config.worker().has_command();
  std::string run_worker;
  if (program) {
    absl::StrAppend(
        &run_worker,
        restart ? "          # A container restarted in its pod finds the marker: it rejoins.\n"
                  "          rejoin=0\n"
                  "          [ -e /var/p3/state/started ] && rejoin=1\n"
                  "          touch /var/p3/state/started\n"
                : "          rejoin=0\n",
        "          # The worker-program contract (docs/worker_api.md); the command itself is in\n"
        "          # P3_WORKER_COMMAND (env below).\n",
        "          export P3_RANK=\"$r\" P3_WORLD_SIZE=", workers,
        " P3_SERVERS=", absl::StrJoin(addresses, ","), " \\\n",
        "            P3_CONFIG=/etc/p3/config.textproto"
        " P3_RESULT_FILE=/var/p3/out/results/worker_$r.json \\\n",
        "            P3_RECORDS_FILE=/var/p3/out/records/worker_$r.csv P3_TRACE_FILE=",
        config.trace() ? "/var/p3/out/traces/worker_$r.json" : "\"\"", " \\\n",
        "            P3_REJOIN=\"$rejoin\" P3_RUN_DIR=/var/p3/out\n",
        "          exec /bin/sh -c \"$P3_WORKER_COMMAND\"\n",
        "        env:\n        - name: P3_WORKER_COMMAND\n          value: ",
        YamlString(config.worker().command()), "\n", env);
  } else {
    absl::StrAppend(
        &run_worker,
        restart ? "          # A container restarted in its pod finds the marker: it rejoins.\n"
                  "          rejoin=\"\"\n"
                  "          [ -e /var/p3/state/started ] && rejoin=\"--rejoin\"\n"
                  "          touch /var/p3/state/started\n"
                : "",
        "          exec ", options.worker_binary,
        " --config=/etc/p3/config.textproto --rank=\"$r\" --servers=",
        absl::StrJoin(addresses, ","),
        " --result_file=/var/p3/out/results/worker_$r.json"
        " --records_file=/var/p3/out/records/worker_$r.csv",
        trace_worker, restart ? " $rejoin" : "", "\n", env.empty() ? "" : "        env:\n", env);
  }
  absl::StrAppend(
      &yaml, "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: ", job, "\n", ns,
      "  labels:\n", labels, "spec:\n  completionMode: Indexed\n  completions: ", workers,
      "\n  parallelism: ", workers, "\n  backoffLimit: ", backoff_limit,
      "\n  template:\n    metadata:\n",
      "      labels:\n        app.kubernetes.io/name: p3\n        p3/experiment: ", base,
      "\n        p3/role: worker\n    spec:\n      restartPolicy: ", restart ? "OnFailure" : "Never",
      "\n      containers:\n",
      "      - name: worker\n        image: ", YamlString(options.image), "\n",
      "        command: [\"/bin/sh\", \"-c\"]\n        args:\n        - |\n", "          set -e\n",
      "          r=\"$JOB_COMPLETION_INDEX\"   # the completion index = the worker rank\n",
      "          mkdir -p /var/p3/out/results /var/p3/out/records /var/p3/out/traces\n",
      run_worker, mounts,
      restart ? "        - name: state\n          mountPath: /var/p3/state\n" : "", pod_volumes(),
      restart ? "      - name: state\n        emptyDir: {}\n" : "");
  return yaml;
}

}  // namespace p3::tools
