#!/usr/bin/env bash
# worker.command end to end with the real binaries: launch_cluster runs
# tests/cluster/p3_worker_from_env.sh, which turns the P3_* environment back into
# p3_worker's flags. The run ends with the param_l2 of the same config run with p3_worker
# directly (bit-identical): the environment carries everything the flags did. Then
# worker 1's program is SIGKILLed at iteration 10 of 40 under --max_restarts=1: it is
# started again with P3_REJOIN=1 (the wrapper passes --rejoin), rejoins, and the run ends
# with the same param_l2.
set -uo pipefail

source tests/testing/cases.sh

TMP="${TEST_TMPDIR:-$(mktemp -d)}"
LAUNCHER=tools/launch_cluster
WRAPPER="$PWD/tests/cluster/p3_worker_from_env.sh"
WORKER="$PWD/worker/p3_worker"
param_l2() { /usr/bin/python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["param_l2"]))' "$1" 2>/dev/null; }

common=(--config=configs/synthetic_smoke.textproto --server_binary=server/p3_server
        --worker_binary=worker/p3_worker --kill_grace_s=2 --plot=false
        --set=training.iterations=40 --set=training.log_every=1
        --set=cluster.peer_timeout_s=20 --set=output.save_model=false)

case_name=reference
output="$TMP/reference.out"
"$LAUNCHER" "${common[@]}" --set=output_dir="$TMP/reference" >"$output" 2>&1
want=$(param_l2 "$TMP/reference/summary.json")
if [[ -z "$want" ]]; then
  fail "the run with p3_worker failed"
else
  ok
fi

case_name=same_parameters
output="$TMP/$case_name.out"
"$LAUNCHER" "${common[@]}" --set=output_dir="$TMP/$case_name" \
  --set=worker.command="$WRAPPER $WORKER" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! grep -q "running worker.command \"$WRAPPER $WORKER\"" "$output"; then
  fail "the launcher did not run the command"
elif [[ "$(param_l2 "$TMP/$case_name/summary.json")" != "$want" ]]; then
  fail "param_l2 $(param_l2 "$TMP/$case_name/summary.json") differs from p3_worker's own run ($want)"
elif ! json_check "$TMP/$case_name/summary.json" "s['iterations'] == 40 and s['worker_program']['results_missing'] == []"; then
  fail "summary.json lacks the workers' results"
else
  echo "param_l2 $want through worker.command, as with p3_worker directly"
  ok
fi

case_name=restart_rejoins
out_dir="$TMP/$case_name"
output="$TMP/$case_name.out"
timeout 180 "$LAUNCHER" "${common[@]}" --set=output_dir="$out_dir" --max_restarts=1 \
  --set=worker.command="$WRAPPER $WORKER" >"$output" 2>&1 &
launcher_pid=$!
for _ in $(seq 600); do
  grep -q '^PROGRESS iteration=10 ' "$out_dir/logs/worker_1.log" 2>/dev/null && break
  sleep 0.1
done
# The wrapper execs p3_worker, under the command's /bin/sh -c.
worker_pid=$(pgrep -f -- "--result_file=$out_dir/results/worker_1.json" | while read -r p; do
  [[ "$(readlink "/proc/$p/exe")" == *p3_worker ]] && echo "$p"; done | head -1)
[[ -n "$worker_pid" ]] && kill -KILL "$worker_pid"
wait "$launcher_pid"
rc=$?
if [[ -z "$worker_pid" ]]; then
  fail "worker 1's p3_worker was not found at iteration 10"
elif [[ $rc -ne 0 ]]; then
  fail "exit status $rc after the restart, expected 0"
elif ! grep -qE 'worker 1 \(pid [0-9]+\) (was killed by signal 9|exited with status 137).*; restarting it with P3_REJOIN=1 \(restart 1 of 1\)' "$output"; then
  fail "the launcher did not restart worker 1's program with P3_REJOIN=1"
elif [[ "$(param_l2 "$out_dir/summary.json")" != "$want" ]]; then
  fail "param_l2 $(param_l2 "$out_dir/summary.json") differs from the run without the kill ($want)"
else
  echo "param_l2 $want after worker 1's program was killed and rejoined"
  ok
fi

finish_cases
