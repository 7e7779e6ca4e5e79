#!/usr/bin/env bash
# `launch_cluster --slurm` against a real Slurm: a private two-node cluster on this machine
# (tests/tools/slurm_cluster.sh: own munged, slurmctld, `slurmd -N n1` and `slurmd -N n2`
# on free loopback ports, everything in the test's temp folder, stopped on every exit
# path). Each case generates the batch script as a user would, submits it with `sbatch`,
# waits (bounded) for the job to end, and checks the job's state and exit code and what
# `launch_cluster --collect` (run by the batch script) wrote:
#   - slurm_job: the real p3_server and p3_worker train a few iterations of small_cnn on
#     synthetic data, a server and a worker on each node; summary.json says every process
#     exited 0 (servers too) on its node, with the figures (param_l2, ...).
#   - slurm_worker_fails: worker 1 (the fake, with injected failure) exits 3; srun ends
#     the job; --collect still runs and names worker 1 on n2 as the first failure.
#   - slurm_server_killed: the real binaries; server 1's process is killed (SIGKILL) once
#     training runs; --collect names server 1 on n2 as the first failure, the others as
#     following or stopped. Before the kill, the server's environment holds the
#     GLIBC_TUNABLES the batch script exports (the heap in huge pages): srun passed it on.
#
# Skipped (tests/testing/skip.sh) when not root or when munge / Slurm are not installed
# (tools/install_deps.sh installs them). Adding a case: call submit_generated with the
# case's environment and launcher flags, then check $job_state, $job_exit, $out_dir
# (see the note at the end on a worker killed under --max_restarts).
set -uo pipefail

source tests/testing/cases.sh
source tests/testing/skip.sh
source tests/tools/slurm_cluster.sh

LAUNCHER="$PWD/tools/launch_cluster"
SERVER="$PWD/server/p3_server"
WORKER="$PWD/worker/p3_worker"
FAKE_SERVER="$PWD/tests/tools/fake_p3_server"
FAKE_WORKER="$PWD/tests/tools/fake_p3_worker"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
JOB_TIMEOUT_S="${P3_SLURM_JOB_TIMEOUT_S:-90}"
# The processes' GLIBC_TUNABLES must come from the batch script, not from sbatch's caller.
unset GLIBC_TUNABLES

if reason=$(slurm_cluster_missing); then
  p3_skip "Slurm cases (slurm_job, slurm_worker_fails, slurm_server_killed)" "$reason"
  finish_cases
fi

trap slurm_cluster_stop EXIT
# bazel's timeout sends SIGTERM: exit through the EXIT trap, stopping the cluster.
trap 'exit 143' TERM INT HUP
case_name=cluster_start
output="$TMP/cluster_start.out"
started=$SECONDS
if ! slurm_cluster_start "$TMP/cluster" >"$output" 2>&1; then
  fail "the private Slurm cluster did not come up"
  finish_cases
fi
echo "private Slurm cluster (n1, n2) up in $((SECONDS - started)) s; SLURM_CONF=$SLURM_CONF"

# wait_for_job ID SECONDS: polls the job until it has ended; sets job_state ("COMPLETED",
# "FAILED", ...) and job_exit ("0:0": exit status:signal). Cancels it and returns 1 if it
# has not ended within SECONDS.
wait_for_job() {
  local id="$1" deadline=$((SECONDS + $2)) info
  while true; do
    info=$(scontrol show job -o "$id" 2>/dev/null)
    job_state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")
    job_exit=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$info")
    case "$job_state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
        return 0 ;;
    esac
    if ((SECONDS >= deadline)); then
      scancel "$id" 2>/dev/null
      return 1
    fi
    sleep 0.2
  done
}

# submit_generated NAME [VAR=value ...] -- LAUNCHER_FLAGS...: writes the job for case NAME
# with `launch_cluster --slurm` into $TMP/NAME (out_dir), and submits it with the
# variables in the job's environment (sbatch passes the environment on). Sets out_dir,
# job_id and job_log (the job's own output: the batch script's and --collect's); returns
# 1 (with `output` holding what went wrong) when it could not generate or submit.
submit_generated() {
  local name="$1"
  shift
  local env_vars=()
  while [[ $# -gt 0 && "$1" != -- ]]; do
    env_vars+=("$1")
    shift
  done
  shift
  out_dir="$TMP/$name"
  output="$TMP/$name.out"
  job_id="" job_state="" job_exit="" job_log=""
  # A fresh folder, as a new user's first run: nothing exists before --slurm.
  rm -rf "$out_dir"
  if ! "$LAUNCHER" --slurm --set=output_dir="$out_dir" "$@" >"$output" 2>&1; then
    echo "launch_cluster --slurm failed" >>"$output"
    return 1
  fi
  if ! job_id=$(env P3_BIND_HOST=127.0.0.1 P3_ADVERTISE_HOST=127.0.0.1 "${env_vars[@]}" \
      sbatch --parsable "$out_dir/slurm/p3.sbatch" 2>>"$output"); then
    echo "sbatch refused the job" >>"$output"
    return 1
  fi
  job_id="${job_id%%;*}"
  job_log="$out_dir/logs/slurm-$job_id.out"
}

# await_job: waits (at most JOB_TIMEOUT_S) for the job submit_generated submitted; sets
# job_state and job_exit and adds the job's output to `output`. Returns 1 when it did not
# end in time (it is cancelled).
await_job() {
  if ! wait_for_job "$job_id" "$JOB_TIMEOUT_S"; then
    {
      echo "job $job_id did not end within ${JOB_TIMEOUT_S}s; cancelled. Its record and the nodes:"
      scontrol show job "$job_id"
      sinfo -N -l
    } >>"$output" 2>&1
    return 1
  fi
  {
    echo "job $job_id: $job_state, exit code $job_exit"
    [[ -f "$job_log" ]] && sed 's/^/job log: /' "$job_log"
  } >>"$output"
  return 0
}

# --- the real binaries train on two nodes; --collect sees every process finish ----------
case_name=slurm_job
if ! submit_generated slurm_job -- --config=configs/synthetic_smoke.textproto \
    --server_binary="$SERVER" --worker_binary="$WORKER" \
    --set=training.iterations=6 --set=training.log_every=2 --set=trace=true \
    --set=cluster.peer_timeout_s=30 || ! await_job; then
  fail "the job could not be generated, submitted or finished"
elif [[ "$job_state" != COMPLETED || "$job_exit" != 0:0 ]]; then
  fail "job $job_state with exit code $job_exit, expected COMPLETED 0:0"
elif [[ ! -s "$job_log" ]]; then
  fail "no job output $job_log (slurmd could not open the --output file?)"
elif ! json_check "$out_dir/summary.json" \
    's["status"] == "ok" and s["iterations"] == 6 and isinstance(s["param_l2"], float) and s["param_l2"] > 0 and [r["rank"] for r in s["workers_results"]] == [0, 1] and all(isinstance(r["param_l2"], float) for r in s["workers_results"])'; then
  fail "summary.json lacks the run's figures"
elif ! json_check "$out_dir/summary.json" \
    '[(p["name"], p["status"], p["node"], p["outcome"]) for p in s["processes"]] == [("server_0", "exit 0", "n1", "ok"), ("server_1", "exit 0", "n2", "ok"), ("worker_0", "exit 0", "n1", "ok"), ("worker_1", "exit 0", "n2", "ok")]'; then
  fail "summary.json does not show every process finished with exit 0 on its node"
elif ! json_check "$out_dir/summary.json" \
    's["straggler"]["rank"] in (0, 1) and len(s["worker_timing"]) == 2 and s["trace"].endswith("/trace.json")'; then
  fail "summary.json lacks the straggler, the worker timing or the trace"
elif grep -q 'not started' "$job_log" || ! grep -q '^server_0 .* exit 0 on n1 ' "$job_log" ||
     ! grep -q '^worker_1 .* exit 0 on n2 ' "$job_log"; then
  fail "--collect's table does not show how the processes ended"
elif ! grep -q 'Slurm node n2, node 1, slot 0): server 1' "$out_dir/logs/server_1.log" ||
     ! grep -q '^PROGRESS iteration=6 total=6' "$out_dir/logs/worker_1.log"; then
  fail "the processes did not run where the placement puts them"
else
  ok
fi

# --- a worker fails: srun ends the job, --collect names the first failure ----------------
case_name=slurm_worker_fails
if ! submit_generated slurm_worker_fails FAKE_P3_WORKER_FAIL_RANK=1 FAKE_P3_WORKER_ITERATION_MS=200 -- \
    --config=configs/default.textproto --server_binary="$FAKE_SERVER" \
    --worker_binary="$FAKE_WORKER" --set=training.iterations=20 --set=cluster.peer_timeout_s=30 ||
   ! await_job; then
  fail "the job could not be generated, submitted or finished"
elif [[ "$job_state" != FAILED || "$job_exit" == 0:* ]]; then
  # (srun's status is the highest of the tasks': 3, or 143 from a task it stopped.)
  fail "job $job_state with exit code $job_exit, expected FAILED with a non-zero exit code"
elif ! json_check "$out_dir/summary.json" \
    's["status"] == "failed" and s["first_failure"]["process"] == "worker_1" and s["first_failure"]["status"] == "exit 3" and s["first_failure"]["node"] == "n2" and "injected failure" in s["first_failure"]["last_log_line"] and all(p["outcome"] != "first failure" for p in s["processes"] if p["name"] != "worker_1")'; then
  fail "summary.json does not name worker 1 on n2 as the first failure"
elif ! grep -q '^\[p3\] first failure: worker 1 on n2 (exit 3)' "$job_log"; then
  fail "--collect does not report the first failure"
else
  ok
fi

# --- a server killed mid-run: --collect names it, not the errors that follow -------------
case_name=slurm_server_killed
# Long enough to be killed mid-run; the job ends as soon as the server dies.
if ! submit_generated slurm_server_killed -- --config=configs/synthetic_smoke.textproto \
    --server_binary="$SERVER" --worker_binary="$WORKER" --set=training.iterations=5000 \
    --set=training.log_every=1 --set=cluster.peer_timeout_s=30; then
  fail "the job could not be generated or submitted"
else
  deadline=$((SECONDS + 60))
  until grep -q '^PROGRESS' "$out_dir/logs/worker_0.log" 2>/dev/null || ((SECONDS >= deadline)); do
    sleep 0.2
  done
  # The p3_server process of server 1 (its task script's command line has no --server_index).
  server_pid=$(pgrep -f -- "--server_index=1 --port_file=$out_dir/ports/server_1.port")
  server_tunables=""
  if [[ -n "$server_pid" ]]; then
    server_tunables=$(tr '\0' '\n' <"/proc/$server_pid/environ" | grep '^GLIBC_TUNABLES=')
    kill -KILL $server_pid
  fi
  if [[ -z "$server_pid" ]]; then
    fail "server 1 was not found running once training had started"
    await_job
  elif [[ "$server_tunables" != GLIBC_TUNABLES=glibc.malloc.hugetlb=1 ]]; then
    fail "server 1 ran without the heap in huge pages: '$server_tunables'"
    await_job
  elif ! await_job; then
    fail "the job did not end after server 1 was killed"
  elif [[ "$job_state" != FAILED ]]; then
    fail "job $job_state, expected FAILED"
  elif ! json_check "$out_dir/summary.json" \
      's["status"] == "failed" and s["first_failure"]["process"] == "server_1" and s["first_failure"]["status"] == "signal 9 (Killed)" and s["first_failure"]["node"] == "n2" and all(p["outcome"] in ("follow-on failure", "stopped after the first failure", "no exit record") for p in s["processes"] if p["name"] != "server_1")'; then
    fail "summary.json does not name server 1 (killed) as the first failure"
  elif ! grep -q '^\[p3\] first failure: server 1 on n2 (signal 9 (Killed))' "$job_log"; then
    fail "--collect does not report server 1 as the first failure"
  else
    ok
  fi
fi

# --- a worker killed mid-run under --max_restarts: its task restarts it, it rejoins -------
case_name=slurm_worker_restarts
restart_flags=(--config=configs/synthetic_smoke.textproto --set=training.iterations=40
  --set=training.log_every=1 --set=cluster.peer_timeout_s=30)
# The same run without a kill, on this machine: the parameters to match bit for bit.
"$LAUNCHER" "${restart_flags[@]}" --server_binary="$SERVER" --worker_binary="$WORKER" \
  --set=output_dir="$TMP/restart_reference" >"$TMP/restart_reference.out" 2>&1
reference_l2=$(/usr/bin/python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["param_l2"]))' \
  "$TMP/restart_reference/summary.json" 2>/dev/null)
if [[ -z "$reference_l2" ]]; then
  fail "the uninterrupted reference run failed: $(tail -3 "$TMP/restart_reference.out")"
elif ! submit_generated slurm_worker_restarts -- "${restart_flags[@]}" --max_restarts=1 \
    --server_binary="$SERVER" --worker_binary="$WORKER"; then
  fail "the job could not be generated or submitted"
else
  deadline=$((SECONDS + 60))
  until grep -q '^PROGRESS iteration=10 ' "$out_dir/logs/worker_1.log" 2>/dev/null ||
      ((SECONDS >= deadline)); do
    sleep 0.1
  done
  worker_pid=$(pgrep -f -- "--result_file=$out_dir/results/worker_1.json")
  [[ -n "$worker_pid" ]] && kill -KILL $worker_pid
  if [[ -z "$worker_pid" ]]; then
    fail "worker 1 was not found running once training had started"
    await_job
  elif ! await_job; then
    fail "the job did not end after worker 1 was killed"
  elif [[ "$job_state" != COMPLETED || "$job_exit" != 0:0 ]]; then
    fail "job $job_state with exit code $job_exit, expected COMPLETED 0:0"
  elif ! grep -q 'restarting it with --rejoin (restart 1 of 1)' "$out_dir/logs/worker_1.log" ||
       ! grep -q '^RESUMED iteration=' "$out_dir/logs/worker_1.log"; then
    fail "worker 1's task did not restart it, or it did not rejoin"
  elif ! json_check "$out_dir/results/worker_1.exit.json" 's["exit_status"] == 0 and s["restarts"] == 1'; then
    fail "worker 1's exit record does not show one restart and a clean end"
  elif ! json_check "$out_dir/summary.json" "s['status'] == 'ok' and repr(s['param_l2']) == '$reference_l2'"; then
    fail "param_l2 after the restart differs from the uninterrupted run's $reference_l2: $(grep -o '"param_l2": [^,]*' "$out_dir/summary.json" | head -1)"
  else
    echo "    param_l2 $reference_l2 with and without the restart"
    ok
  fi
fi

finish_cases
