#!/usr/bin/env bash
# Multi-host launching (docs/multihost.md) against the fake server and worker, all on
# this machine:
#   - Kubernetes: the manifests `launch_cluster --kubernetes` writes parse as YAML and
#     hold the expected objects; the ConfigMap's config loads again.
#   - Slurm: the batch script `launch_cluster --slurm` writes runs under a stand-in `srun`
#     that starts its tasks here with SLURM_PROCID / SLURM_NTASKS; the task script picks
#     each task's role, the processes run, and `--collect` writes summary.json. A quick
#     check that needs no root; it cannot see what slurmd does around the script (such as
#     opening the #SBATCH --output file first): //tests/tools:slurm_cluster_test submits
#     the same script to a real Slurm.
#   - worker.command (a program of the user's own instead of p3_worker) through each back
#     end: the manifests and the batch script carry the command and set the P3_*
#     environment; under Slurm and ssh the program runs and records it.
#   - GLIBC_TUNABLES (the heap in huge pages, docs/launcher.md) as the launcher has it
#     reaches the processes of every back end, none of which passes the launcher's
#     environment on: glibc.malloc.hugetlb=1 added, or the user's =0 kept.
#   - ssh: when Debian's sshd is installed and we are root, a throwaway sshd on a free
#     loopback port (own host key, own authorized key, in a temp folder) runs the
#     processes of `launch_cluster --hosts`; it is stopped at the end. Otherwise those
#     cases are reported as skipped (tests/testing/skip.sh). tools/install_deps.sh
#     installs openssh-server and CI runs as root, so there they run.
# Everything is bounded in time.
#
# Usage: multihost_launch_test.sh files|ssh|all. Two Bazel targets run it: "files"
# (Kubernetes, Slurm: anyone) and "ssh" (root and sshd: listed as SKIPPED by `bazel test`
# where the machine lacks them, third_party/host_facts.bzl).
set -uo pipefail

cases="${1:-all}"
case "$cases" in
  files | ssh | all) ;;
  *) echo "usage: $0 files|ssh|all" >&2; exit 2 ;;
esac

source tests/testing/cases.sh
source tests/testing/skip.sh

LAUNCHER="$PWD/tools/launch_cluster"
FAKE_SERVER="$PWD/tests/tools/fake_p3_server"
FAKE_WORKER="$PWD/tests/tools/fake_p3_worker"
TASK_SCRIPT="$PWD/tools/p3_slurm_task.sh"
CONFIG="$PWD/configs/default.textproto"
# worker.command's program: records its P3_* environment in
# $P3_RUN_DIR/env_<rank>_<P3_REJOIN>.txt, then runs the fake worker.
PROGRAM="$PWD/tests/tools/fake_worker_program.sh $FAKE_WORKER"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
PY=/usr/bin/python3

free_port() {  # A port P such that P and P + 1 are free on loopback now.
  "$PY" - <<'EOF'
import socket
while True:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); port = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", port + 1)); print(port); break
    except OSError:
        pass
    finally:
        a.close(); b.close()
EOF
}

# env_check FILE PYTHON_EXPRESSION_ON_e: the expression holds for the dict of FILE's
# NAME=value lines (a worker program's recorded environment).
env_check() {
  "$PY" -c "import sys
e = dict(l.rstrip('\n').split('=', 1) for l in open(sys.argv[1]))
assert $2, (e, sys.argv[2])" "$1" "$2"
}
P3_NAMES="['P3_CONFIG', 'P3_RANK', 'P3_RECORDS_FILE', 'P3_REJOIN', 'P3_RESULT_FILE', 'P3_RUN_DIR', 'P3_SERVERS', 'P3_TRACE_FILE', 'P3_WORLD_SIZE']"

if [[ "$cases" != ssh ]]; then
# ===================================== Kubernetes =========================================
case_name=kubernetes
out_dir="$TMP/kube"
output="$TMP/$case_name.out"
env -u GLIBC_TUNABLES "$LAUNCHER" --config="$CONFIG" --kubernetes --set=output_dir="$out_dir" --set=name=P3_Kube \
  --set=cluster.workers=3 --set=trace=true --kube_image=registry.example/p3:1 \
  --kube_namespace=ml --server_port=7000 >"$output" 2>&1
rc=$?
yaml="$out_dir/kubernetes/p3.yaml"
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! grep -q "^\[p3\] run:     kubectl apply -f $yaml\$" "$output"; then
  fail "how to apply the manifests is not printed"
elif ! "$PY" - "$yaml" "$TMP/kube_config.textproto" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = [d["kind"] for d in docs]
assert kinds == ["ConfigMap", "Service", "StatefulSet", "Job"], kinds
config_map, service, servers, workers = docs
assert all(d["metadata"]["namespace"] == "ml" for d in docs)
assert service["spec"]["clusterIP"] == "None" and service["spec"]["ports"][0]["port"] == 7000
assert servers["spec"]["serviceName"] == service["metadata"]["name"] == "p3-p3-kube-servers"
assert servers["spec"]["replicas"] == 2
assert servers["spec"]["selector"]["matchLabels"].items() <= servers["spec"]["template"]["metadata"]["labels"].items()
assert service["spec"]["selector"].items() <= servers["spec"]["template"]["metadata"]["labels"].items()
server = servers["spec"]["template"]["spec"]["containers"][0]
assert server["image"] == "registry.example/p3:1"
assert '--server_index="$i"' in server["args"][0] and "--port=7000" in server["args"][0]
job = workers["spec"]
assert job["completionMode"] == "Indexed" and job["completions"] == 3 and job["parallelism"] == 3
assert job["template"]["spec"]["restartPolicy"] == "Never"
worker = job["template"]["spec"]["containers"][0]["args"][0]
assert 'r="$JOB_COMPLETION_INDEX"' in worker and '--rank="$r"' in worker, worker
assert "--servers=p3-p3-kube-server-0.p3-p3-kube-servers:7000,p3-p3-kube-server-1.p3-p3-kube-servers:7000 " in worker
assert "--trace_file=/var/p3/out/traces/worker_$r.json" in worker
huge = [{"name": "GLIBC_TUNABLES", "value": "glibc.malloc.hugetlb=1"}]
assert server["env"] == huge, server.get("env")
assert job["template"]["spec"]["containers"][0]["env"] == huge
text = config_map["data"]["config.textproto"]
assert 'output_dir: "/var/p3/out"' in text and "workers: 3" in text, text
open(sys.argv[2], "w").write(text)
EOF
then
  fail "the manifests lack an object or a key setting (see the Python assertion above)"
elif ! "$LAUNCHER" --config="$TMP/kube_config.textproto" --kubernetes \
    --set=output_dir="$TMP/kube_again" >/dev/null 2>&1; then
  fail "the config in the ConfigMap does not load"
else
  ok
fi

case_name=kubernetes_worker_program
out_dir="$TMP/kube_program"
output="$TMP/$case_name.out"
GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "$LAUNCHER" --config="$CONFIG" --kubernetes \
  --set=output_dir="$out_dir" --set=name=prog \
  --max_restarts=1 --set=worker.command="python3 train.py --note 'it''s \"quoted\"'" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! "$PY" - "$out_dir/kubernetes/p3.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
job = docs[3]["spec"]
container = job["template"]["spec"]["containers"][0]
script = container["args"][0]
env = {v["name"]: v["value"] for v in container["env"]}
assert env == {"P3_WORKER_COMMAND": "python3 train.py --note 'it''s \"quoted\"'",
               "GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, env
assert 'exec /bin/sh -c "$P3_WORKER_COMMAND"' in script and "p3_worker" not in script, script
for name, value in [("P3_RANK", '"$r"'), ("P3_WORLD_SIZE", "2"),
                    ("P3_SERVERS", "p3-prog-server-0.p3-prog-servers:50051,p3-prog-server-1.p3-prog-servers:50051"),
                    ("P3_CONFIG", "/etc/p3/config.textproto"),
                    ("P3_RESULT_FILE", "/var/p3/out/results/worker_$r.json"),
                    ("P3_RECORDS_FILE", "/var/p3/out/records/worker_$r.csv"),
                    ("P3_TRACE_FILE", '""'), ("P3_REJOIN", '"$rejoin"'), ("P3_RUN_DIR", "/var/p3/out")]:
    assert f"{name}={value}" in script, (name, script)
# A container restarted in its pod (restartPolicy OnFailure) rejoins with P3_REJOIN=1.
assert job["template"]["spec"]["restartPolicy"] == "OnFailure"
assert "[ -e /var/p3/state/started ] && rejoin=1" in script and "rejoin=0" in script, script
# The user's GLIBC_TUNABLES, in the server containers too.
server = docs[2]["spec"]["template"]["spec"]["containers"][0]
assert server["env"] == [{"name": "GLIBC_TUNABLES", "value": "glibc.malloc.hugetlb=0"}], server
EOF
then
  fail "the worker Job does not run worker.command with the P3_* environment and GLIBC_TUNABLES"
else
  # The worker container's script, run here by sh twice (a restart in the same pod):
  # the environment its command gets.
  script=$("$PY" -c 'import sys, yaml; d = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d][3]; print(d["spec"]["template"]["spec"]["containers"][0]["args"][0])' "$out_dir/kubernetes/p3.yaml" |
    sed -e 's#/var/p3/state#'"$TMP/kube_state"'#g' -e 's#mkdir -p /var/p3/out.*#:#')
  mkdir -p "$TMP/kube_state"
  for run in first again; do
    P3_WORKER_COMMAND='env | grep "^P3_" | sort >"$KUBE_ENV"' JOB_COMPLETION_INDEX=1 \
      KUBE_ENV="$TMP/kube_env_$run.txt" sh -c "$script"
  done
  if ! env_check "$TMP/kube_env_first.txt" "set($P3_NAMES) <= set(e) and e['P3_RANK'] == '1' and e['P3_REJOIN'] == '0' and e['P3_WORLD_SIZE'] == '2' and e['P3_RESULT_FILE'] == '/var/p3/out/results/worker_1.json' and e['P3_TRACE_FILE'] == ''" ||
     ! env_check "$TMP/kube_env_again.txt" "e['P3_REJOIN'] == '1'"; then
    fail "the worker container's script does not set the environment (P3_REJOIN=1 when restarted)"
  else
    ok
  fi
fi

# ======================================== Slurm ===========================================
case_name=slurm_roles
output="$TMP/$case_name.out"
roles() {  # roles W S M K PLACEMENT: the role of every task, one per line
  local p
  for ((p = 0; p < $3 * $4; p++)); do
    SLURM_PROCID=$p SLURM_NTASKS=$(($3 * $4)) "$TASK_SCRIPT" --print_role --config=x \
      --output_dir=x --workers="$1" --servers="$2" --machines="$3" --tasks_per_node="$4" \
      --placement="$5"
  done | paste -sd, -
}
colocated=$(roles 4 2 4 2 colocated)
separate=$(roles 2 2 4 1 separate)
if [[ "$colocated" != "server 0 0,worker 0 0,server 1 1,worker 1 1,worker 2 2,idle,worker 3 3,idle" ]]; then
  fail "colocated roles: $colocated"
elif [[ "$separate" != "worker 0 0,worker 1 1,server 0 2,server 1 3" ]]; then
  fail "separate roles: $separate"
elif SLURM_PROCID=0 SLURM_NTASKS=3 "$TASK_SCRIPT" --print_role --config=x --output_dir=x \
    --workers=2 --servers=2 --machines=2 --tasks_per_node=2 >"$output" 2>&1 ||
    ! grep -q 'SLURM_NTASKS=3, expected machines x tasks_per_node = 4' "$output"; then
  fail "a wrong task count is not refused"
elif "$TASK_SCRIPT" --print_role --config=x --output_dir=x --workers=1 --servers=1 \
    --machines=1 --tasks_per_node=2 >"$output" 2>&1 || ! grep -q 'SLURM_PROCID is unset' "$output"; then
  fail "running outside srun is not refused"
else
  ok
fi

case_name=slurm_job
out_dir="$TMP/slurm"
output="$TMP/$case_name.out"
# A stand-in for srun: starts --ntasks copies of the command here, with the task
# environment, and fails if any fails.
mkdir -p "$TMP/bin"
cat >"$TMP/bin/srun" <<'EOF'
#!/usr/bin/env bash
ntasks=1
while [[ $# -gt 0 && "$1" == --* ]]; do
  [[ "$1" == --ntasks=* ]] && ntasks="${1#*=}"
  shift
done
pids=()
for ((p = 0; p < ntasks; p++)); do
  SLURM_PROCID=$p SLURM_NTASKS=$ntasks "$@" &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
exit $rc
EOF
chmod +x "$TMP/bin/srun"
env -u GLIBC_TUNABLES "$LAUNCHER" --config="$CONFIG" --slurm --set=output_dir="$out_dir" \
  --set=training.iterations=5 \
  --set=trace=true --server_binary="$FAKE_SERVER" --worker_binary="$FAKE_WORKER" \
  --slurm_partition=cpu --slurm_task_script="$TASK_SCRIPT" >"$output" 2>&1
rc=$?
batch="$out_dir/slurm/p3.sbatch"
if [[ $rc -ne 0 ]]; then
  fail "--slurm: exit status $rc, expected 0"
elif ! grep -q "^\[p3\] submit with: sbatch $batch\$" "$output" ||
     ! grep -qx '#SBATCH --partition=cpu' "$batch" || ! grep -qx '#SBATCH --ntasks=4' "$batch" ||
     [[ ! -x "$out_dir/slurm/p3_slurm_task.sh" ]] ||
     ! grep -q "output_dir: \"$out_dir\"" "$out_dir/config.textproto"; then
  fail "the batch script, the task script or the config is missing or wrong"
elif ! grep -qx "export GLIBC_TUNABLES='glibc.malloc.hugetlb=1'" "$batch"; then
  fail "the batch script does not give the tasks the heap in huge pages (GLIBC_TUNABLES)"
else
  # "Submit" it: its srun is the stand-in above; servers bind and advertise loopback.
  PATH="$TMP/bin:$PATH" P3_BIND_HOST=127.0.0.1 P3_ADVERTISE_HOST=127.0.0.1 \
    timeout 120 bash "$batch" >"$output" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "the batch script exited with status $rc"
  elif ! json_check "$out_dir/summary.json" \
      's["iterations"] == 5 and [r["rank"] for r in s["workers_results"]] == [0, 1] and s["trace"].endswith("/trace.json")'; then
    fail "--collect did not write the summary"
  elif ! grep -q '^PROGRESS iteration=5 total=5' "$out_dir/logs/worker_1.log" ||
       ! grep -q 'task 2 of 4 on .*: server 1' "$out_dir/logs/server_1.log"; then
    fail "the processes' logs are not where the launcher puts them"
  elif ! json_check "$out_dir/trace.json" 'sorted({e["pid"] for e in s["traceEvents"]}) == [100, 101, 200, 201]'; then
    fail "trace.json does not merge the four processes"
  elif ! grep -q '^worker_1 .* exit 0 on ' "$output" || ! grep -q '^server_1 .* exit 0 on ' "$output"; then
    fail "--collect did not print the table with how each process ended"
  else
    ok
  fi
fi

case_name=slurm_worker_program
out_dir="$TMP/slurm_program"
output="$TMP/$case_name.out"
# Rank 1's program fails at its first start: the task starts it again with P3_REJOIN=1.
# The user's GLIBC_TUNABLES when the files are written is what the tasks get.
GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "$LAUNCHER" --config="$CONFIG" --slurm --set=output_dir="$out_dir" --set=training.iterations=4 \
  --server_binary="$FAKE_SERVER" --worker_binary=/nonexistent/p3_worker --max_restarts=1 \
  --slurm_task_script="$TASK_SCRIPT" --set=worker.command="FAIL_FIRST_RANK=1 $PROGRAM" >"$output" 2>&1
rc=$?
batch="$out_dir/slurm/p3.sbatch"
if [[ $rc -ne 0 ]]; then
  fail "--slurm: exit status $rc, expected 0"
elif ! grep -qF -- "'--worker_command=FAIL_FIRST_RANK=1 $PROGRAM'" "$batch"; then
  fail "the batch script does not pass worker.command to the task script"
else
  env -u GLIBC_TUNABLES PATH="$TMP/bin:$PATH" P3_BIND_HOST=127.0.0.1 P3_ADVERTISE_HOST=127.0.0.1 \
    timeout 120 bash "$batch" >"$output" 2>&1
  rc=$?
  ports="$(cat "$out_dir/ports/server_0.port" 2>/dev/null),$(cat "$out_dir/ports/server_1.port" 2>/dev/null)"
  if [[ $rc -ne 0 ]]; then
    fail "the batch script exited with status $rc"
  elif ! env_check "$out_dir/env_0_0.txt" "set($P3_NAMES) <= set(e) and e['P3_RANK'] == '0' and e['P3_WORLD_SIZE'] == '2' and e['P3_SERVERS'] == '127.0.0.1:' + '$ports'.replace(',', ',127.0.0.1:') and e['P3_CONFIG'] == '$out_dir/config.textproto' and e['P3_RESULT_FILE'] == '$out_dir/results/worker_0.json' and e['P3_RECORDS_FILE'] == '$out_dir/records/worker_0.csv' and e['P3_TRACE_FILE'] == '' and e['P3_RUN_DIR'] == '$out_dir' and e['P3_REJOIN'] == '0'"; then
    fail "rank 0's program did not get the environment"
  elif [[ ! -s "$out_dir/env_1_0.txt" ]] || ! env_check "$out_dir/env_1_1.txt" "e['P3_RANK'] == '1' and e['P3_REJOIN'] == '1'"; then
    fail "rank 1's program was not started again with P3_REJOIN=1"
  elif [[ "$(cat "$out_dir/tunables_0_0.txt" "$out_dir/tunables_1_1.txt" 2>&1)" != \
          "$(printf 'glibc.malloc.hugetlb=0\nglibc.malloc.hugetlb=0')" ]]; then
    fail "the programs did not get the launcher's GLIBC_TUNABLES: $(cat "$out_dir"/tunables_* 2>&1)"
  elif ! grep -q 'restarting it with P3_REJOIN=1 (restart 1 of 1)' "$out_dir/logs/worker_1.log"; then
    fail "the task script does not say it restarts the program"
  elif ! json_check "$out_dir/summary.json" 's["iterations"] == 4 and s["worker_program"]["results_missing"] == []'; then
    fail "--collect did not read the programs' results"
  else
    ok
  fi
fi

fi  # files

if [[ "$cases" == files ]]; then
  finish_cases
fi

# ========================================= ssh ============================================
ssh_missing=""
if ! p3_is_root; then
  ssh_missing="need root to start a throwaway sshd (running as $(id -un))"
elif [[ ! -x /usr/sbin/sshd ]]; then
  ssh_missing="/usr/sbin/sshd is missing (apt-get install openssh-server, or tools/install_deps.sh)"
elif ! command -v ssh >/dev/null || ! command -v ssh-keygen >/dev/null; then
  ssh_missing="ssh or ssh-keygen is missing (apt-get install openssh-client)"
fi
if [[ -n "$ssh_missing" ]]; then
  p3_skip "ssh cases" "$ssh_missing"
  finish_cases
fi
ssh_dir="$TMP/sshd"
mkdir -p "$ssh_dir"
chmod 700 "$ssh_dir"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/client_key"
cp "$ssh_dir/client_key.pub" "$ssh_dir/authorized_keys"
ssh_port=$(free_port)
cat >"$ssh_dir/sshd_config" <<EOF
Port $ssh_port
ListenAddress 127.0.0.1
HostKey $ssh_dir/host_key
AuthorizedKeysFile $ssh_dir/authorized_keys
PidFile $ssh_dir/sshd.pid
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
EOF
cat >"$ssh_dir/ssh_config" <<EOF
Host *
  Port $ssh_port
  IdentityFile $ssh_dir/client_key
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  LogLevel ERROR
  ConnectTimeout 10
EOF
# sshd's privilege separation folder; created only if missing, removed if we created it.
made_run_sshd=0
if [[ ! -d /run/sshd ]]; then
  mkdir -p /run/sshd && chmod 755 /run/sshd && made_run_sshd=1
fi
stop_sshd() {
  [[ -s "$ssh_dir/sshd.pid" ]] && kill "$(cat "$ssh_dir/sshd.pid")" 2>/dev/null
  ((made_run_sshd)) && rmdir /run/sshd 2>/dev/null
  return 0
}
trap stop_sshd EXIT
/usr/sbin/sshd -f "$ssh_dir/sshd_config" -E "$ssh_dir/sshd.log"
SSH="ssh -F $ssh_dir/ssh_config"
for _ in $(seq 1 50); do
  timeout 10 $SSH -o BatchMode=yes 127.0.0.1 true 2>/dev/null && break
  sleep 0.2
done
# Two "hosts": both loopback, under different names.
printf '127.0.0.1\nlocalhost 127.0.0.1  # second host\n' >"$TMP/hosts.txt"

case_name=ssh_shared_folder
out_dir="$TMP/ssh_shared"
output="$TMP/$case_name.out"
timeout 120 "$LAUNCHER" --config="$CONFIG" --hosts="$TMP/hosts.txt" --ssh="$SSH" \
  --server_binary="$FAKE_SERVER" --worker_binary="$FAKE_WORKER" --kill_grace_s=2 \
  --set=output_dir="$out_dir" --set=training.iterations=4 --set=training.log_every=2 >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! grep -q '^\[p3\]   host 1 localhost (127.0.0.1): server_1, worker_1$' "$output"; then
  fail "the placement on hosts is not shown"
elif ! grep -q '^\[p3\] iter 4/4  loss' "$output"; then
  fail "rank 0's progress (its stdout through ssh) is not shown"
elif ! json_check "$out_dir/summary.json" 's["hosts"] == ["127.0.0.1", "localhost"] and s["iterations"] == 4'; then
  fail "summary.json lacks the hosts or the results"
else
  ok
fi

case_name=ssh_remote_folder
out_dir="$TMP/ssh_local_side"
remote_dir="$TMP/ssh_remote_side"
output="$TMP/$case_name.out"
timeout 120 "$LAUNCHER" --config="$CONFIG" --hosts="$TMP/hosts.txt" --ssh="$SSH" \
  --server_binary="$FAKE_SERVER" --worker_binary="$FAKE_WORKER" --kill_grace_s=2 \
  --remote_output_dir="$remote_dir" --server_port="$(free_port)" --set=trace=true \
  --set=output_dir="$out_dir" --set=training.iterations=3 >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif [[ ! -s "$remote_dir/results/worker_1.json" || ! -s "$remote_dir/config.textproto" ]]; then
  fail "the processes did not write to --remote_output_dir"
elif [[ ! -s "$out_dir/results/worker_1.json" || ! -s "$out_dir/records/worker_0.csv" ||
        ! -s "$out_dir/traces/server_1.json" ]]; then
  fail "results, records and traces were not copied back"
elif ! json_check "$out_dir/summary.json" 's["iterations"] == 3 and s["trace"].endswith("trace.json")'; then
  fail "no summary or trace from the copied files"
elif [[ ! -s "$remote_dir/model.pt" || ! -s "$out_dir/model.pt" ]]; then
  fail "rank 0's model was not written to --remote_output_dir and copied back"
elif ! json_check "$out_dir/summary.json" "s['model_file'] == '$(realpath "$out_dir")/model.pt'"; then
  fail "summary.json does not name the local copy of the model: $(grep model_file "$out_dir/summary.json")"
elif ! grep -q 'on fixed ports' "$output"; then
  fail "fixed ports not used"
else
  ok
fi

case_name=ssh_worker_restart
# The real binaries on the two "hosts"; worker 1 (started over ssh) is SIGKILLed at
# iteration 10 of 40 under --max_restarts=1: the launcher starts it again over ssh with
# --rejoin, and the run ends with the parameters of a run without the kill.
out_dir="$TMP/ssh_restart"
output="$TMP/$case_name.out"
restart_flags=(--config="$PWD/configs/synthetic_smoke.textproto" --server_binary="$PWD/server/p3_server"
  --worker_binary="$PWD/worker/p3_worker" --set=training.iterations=40 --set=training.log_every=1
  --set=cluster.peer_timeout_s=30 --set=output.save_model=false)
"$LAUNCHER" "${restart_flags[@]}" --set=output_dir="$TMP/ssh_restart_reference" \
  >"$TMP/ssh_restart_reference.out" 2>&1
want=$("$PY" -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["param_l2"]))' \
  "$TMP/ssh_restart_reference/summary.json" 2>/dev/null)
timeout 180 "$LAUNCHER" "${restart_flags[@]}" --hosts="$TMP/hosts.txt" --ssh="$SSH" \
  --kill_grace_s=2 --max_restarts=1 --set=output_dir="$out_dir" >"$output" 2>&1 &
launcher_pid=$!
for _ in $(seq 600); do
  grep -q '^PROGRESS iteration=10 ' "$out_dir/logs/worker_1.log" 2>/dev/null && break
  sleep 0.1
done
worker_pid=$(pgrep -f -- "--result_file=$out_dir/results/worker_1.json" | while read -r p; do
  [[ "$(readlink "/proc/$p/exe")" == *p3_worker ]] && echo "$p"; done | head -1)
[[ -n "$worker_pid" ]] && kill -KILL "$worker_pid"
wait "$launcher_pid"
rc=$?
if [[ -z "$want" ]]; then
  fail "the reference run failed: $(tail -3 "$TMP/ssh_restart_reference.out")"
elif [[ -z "$worker_pid" ]]; then
  fail "worker 1's p3_worker process was not found at iteration 10"
elif [[ $rc -ne 0 ]]; then
  fail "exit status $rc after the restart, expected 0: $(tail -5 "$output")"
elif ! grep -q 'restarting it with --rejoin (restart 1 of 1)' "$output"; then
  fail "the launcher did not restart worker 1"
elif ! json_check "$out_dir/summary.json" "repr(s['param_l2']) == '$want'"; then
  fail "param_l2 differs from the run without the kill ($want)"
else
  ok
fi

case_name=ssh_worker_program
# worker.command over ssh: the environment reaches the program on its host (ssh forwards
# none of the launcher's), with the hosts' addresses, and so does GLIBC_TUNABLES with the
# heap in huge pages.
out_dir="$TMP/ssh_program"
output="$TMP/$case_name.out"
env -u GLIBC_TUNABLES timeout 120 "$LAUNCHER" --config="$CONFIG" --hosts="$TMP/hosts.txt" --ssh="$SSH" \
  --server_binary="$FAKE_SERVER" --worker_binary=/nonexistent/p3_worker --kill_grace_s=2 \
  --set=output_dir="$out_dir" --set=training.iterations=3 --set=worker.command="$PROGRAM" >"$output" 2>&1
rc=$?
ports="$(cat "$out_dir/ports/server_0.port" 2>/dev/null),$(cat "$out_dir/ports/server_1.port" 2>/dev/null)"
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! env_check "$out_dir/env_1_0.txt" "set($P3_NAMES) <= set(e) and e['P3_RANK'] == '1' and e['P3_WORLD_SIZE'] == '2' and e['P3_SERVERS'] == '127.0.0.1:' + '$ports'.replace(',', ',127.0.0.1:') and e['P3_CONFIG'] == '$out_dir/config.textproto' and e['P3_RESULT_FILE'] == '$out_dir/results/worker_1.json' and e['P3_REJOIN'] == '0' and e['P3_RUN_DIR'] == '$out_dir'"; then
  fail "the program on host 1 did not get the environment"
elif [[ "$(cat "$out_dir/tunables_0_0.txt" "$out_dir/tunables_1_0.txt" 2>&1)" != \
        "$(printf 'glibc.malloc.hugetlb=1\nglibc.malloc.hugetlb=1')" ]]; then
  fail "the programs on the hosts did not get GLIBC_TUNABLES=glibc.malloc.hugetlb=1: $(cat "$out_dir"/tunables_* 2>&1)"
elif ! json_check "$out_dir/summary.json" 's["iterations"] == 3 and s["worker_program"]["results_missing"] == []'; then
  fail "summary.json lacks the programs' results"
else
  ok
fi

case_name=ssh_worker_program_sigterm
# The program runs under the command's /bin/sh -c (which does not exec it): stopping the
# launcher stops it too on its host.
out_dir="$TMP/ssh_program_sigterm"
output="$TMP/$case_name.out"
"$LAUNCHER" --config="$CONFIG" --hosts="$TMP/hosts.txt" --ssh="$SSH" --kill_grace_s=2 \
  --server_binary="$FAKE_SERVER" --worker_binary=/nonexistent/p3_worker \
  --set=output_dir="$out_dir" --set=worker.command="FAKE_P3_WORKER_MODE=hang $PROGRAM" >"$output" 2>&1 &
launcher_pid=$!
for _ in $(seq 1 300); do
  [[ $(grep -l 'connected to 2 servers' "$out_dir"/logs/worker_*.log 2>/dev/null | wc -l) -eq 2 ]] && break
  sleep 0.1
done
running=$(pgrep -fc "fake_p3_worker .*$out_dir")
kill -TERM "$launcher_pid"
wait "$launcher_pid"
rc=$?
left=1
for _ in $(seq 1 50); do
  left=$(pgrep -fc "fake_p3_.*$out_dir")
  [[ $left -eq 0 ]] && break
  sleep 0.1
done
if [[ $rc -ne 143 ]]; then
  fail "exit status $rc, expected 143"
elif [[ $running -lt 2 ]]; then
  fail "only $running programs' workers were running before SIGTERM"
elif [[ $left -ne 0 ]]; then
  fail "$left remote processes still run after the launcher stopped"
  for pid in $(pgrep -f "fake_p3_.*$out_dir"); do kill -KILL "$pid"; done
else
  ok
fi

case_name=ssh_sigterm
out_dir="$TMP/ssh_sigterm"
output="$TMP/$case_name.out"
# ssh does not forward the environment: the fault injection goes in a wrapper.
printf '#!/bin/sh\nFAKE_P3_WORKER_MODE=hang exec %s "$@"\n' "$FAKE_WORKER" >"$TMP/hang_worker"
chmod +x "$TMP/hang_worker"
"$LAUNCHER" --config="$CONFIG" --hosts="$TMP/hosts.txt" --ssh="$SSH" --kill_grace_s=2 \
  --server_binary="$FAKE_SERVER" --worker_binary="$TMP/hang_worker" \
  --set=output_dir="$out_dir" >"$output" 2>&1 &
launcher_pid=$!
for _ in $(seq 1 300); do
  [[ $(grep -l 'connected to 2 servers' "$out_dir"/logs/worker_*.log 2>/dev/null | wc -l) -eq 2 ]] && break
  sleep 0.1
done
running=$(pgrep -fc "fake_p3_.*$out_dir")
kill -TERM "$launcher_pid"
wait "$launcher_pid"
rc=$?
left=1
for _ in $(seq 1 50); do  # The remote side stops within moments of ssh ending.
  left=$(pgrep -fc "fake_p3_.*$out_dir")
  [[ $left -eq 0 ]] && break
  sleep 0.1
done
if [[ $rc -ne 143 ]]; then
  fail "exit status $rc, expected 143"
elif [[ $running -lt 4 ]]; then
  fail "only $running remote processes were running before SIGTERM"
elif [[ $left -ne 0 ]]; then
  fail "$left remote processes still run after the launcher stopped"
  for pid in $(pgrep -f "fake_p3_.*$out_dir"); do kill -KILL "$pid"; done
else
  ok
fi

finish_cases
