#!/usr/bin/env bash
# launch_cluster with worker.command (docs/worker_api.md, "Run your own program with
# launch_cluster") against the fake server and worker: the command runs once per rank with
# the P3_* environment, every variable present and right; a program that writes no result
# file leaves a summary saying so, one that writes P3_RESULT_FILE gives the run's figures
# and progress; a failing program is the first failure; --max_restarts starts a dead one
# again with P3_REJOIN=1; bad worker.command configs are refused naming the field.
# (//tests/cluster:worker_program_test runs the real p3_worker through worker.command.)
set -uo pipefail

source tests/testing/cases.sh

LAUNCHER=tools/launch_cluster
FAKE_WORKER="$PWD/tests/tools/fake_p3_worker"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"

# The worker program (tests/tools/fake_worker_program.sh): records its environment in
# $P3_RUN_DIR/env_<rank>_<rejoin>.txt, then runs the fake worker.
PROGRAM="$PWD/tests/tools/fake_worker_program.sh $FAKE_WORKER"

# Runs the launcher with the fake server; no p3_worker at all (--worker_binary is not
# there: the command replaces it). Output to $output, exit status to $rc.
launch() {
  output="$TMP/$case_name.out"
  "$LAUNCHER" --server_binary=tests/tools/fake_p3_server --worker_binary="$TMP/no_such_worker" \
    --kill_grace_s=2 --plot=false --config=configs/default.textproto "$@" >"$output" 2>&1
  rc=$?
}

# env_check FILE PYTHON_EXPRESSION_ON_e: the expression holds for the dict of FILE's
# NAME=value lines.
env_check() {
  /usr/bin/python3 -c "import sys
e = dict(l.rstrip('\n').split('=', 1) for l in open(sys.argv[1]))
assert $2, (e, sys.argv[2])" "$1" "$2"
}

# --- the environment: every variable, right for each rank; no result file ------------
case_name=environment
out="$TMP/environment"
mkdir -p "$TMP/elsewhere"
RESULT_ELSEWHERE="$TMP/elsewhere" launch --set=output_dir="$out" --set=training.iterations=6 \
  --set=worker.command="$PROGRAM"
names="['P3_CONFIG', 'P3_RANK', 'P3_RECORDS_FILE', 'P3_REJOIN', 'P3_RESULT_FILE', 'P3_RUN_DIR', 'P3_SERVERS', 'P3_TRACE_FILE', 'P3_WORLD_SIZE']"
ports="$(cat "$out/ports/server_0.port" 2>/dev/null),$(cat "$out/ports/server_1.port" 2>/dev/null)"
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0 (a program may leave P3_RESULT_FILE unwritten)"
elif [[ ! -s "$out/env_0_0.txt" || ! -s "$out/env_1_0.txt" ]]; then
  fail "the program did not run once per rank with P3_REJOIN=0"
elif ! env_check "$out/env_0_0.txt" "sorted(e) == $names and e['P3_RANK'] == '0'" ||
     ! env_check "$out/env_1_0.txt" "sorted(e) == $names and e['P3_RANK'] == '1'"; then
  fail "a variable is missing, extra, or the ranks are not 0 and 1"
elif ! env_check "$out/env_1_0.txt" "e['P3_WORLD_SIZE'] == '2' and e['P3_REJOIN'] == '0' and e['P3_TRACE_FILE'] == '' and e['P3_RUN_DIR'] == '$out' and e['P3_CONFIG'] == '$out/config.textproto' and e['P3_RESULT_FILE'] == '$out/results/worker_1.json' and e['P3_RECORDS_FILE'] == '$out/records/worker_1.csv'"; then
  fail "a path or count in the environment is wrong"
elif ! env_check "$out/env_0_0.txt" "[a.rsplit(':', 1)[1] for a in e['P3_SERVERS'].split(',')] == '$ports'.split(',') and e['P3_SERVERS'].startswith('127.0.0.1:')"; then
  fail "P3_SERVERS is not the servers' addresses in index order ($ports)"
elif [[ -e "$out/results/worker_0.json" || ! -s "$TMP/elsewhere/worker_0.json" ]]; then
  fail "the program's result went to P3_RESULT_FILE although it was told otherwise"
elif ! json_check "$out/summary.json" "s['status'] == 'ok' and s['iterations'] is None and s['workers_results'] == [] and s['worker_program']['command'] == '$PROGRAM' and s['worker_program']['results_missing'] == ['worker_0', 'worker_1'] and 'note' in s['worker_program']"; then
  fail "summary.json does not say that the results are missing"
elif ! grep -q "^\[p3\] done in .*: rank 0's program wrote no result file" "$output" ||
     ! grep -q "running worker.command \"$PROGRAM\"" "$output"; then
  fail "the launcher does not say what ran and that there is no result"
else
  ok
fi

# --- results, progress and traces through P3_RESULT_FILE / P3_TRACE_FILE ---------------
case_name=results
out="$TMP/results"
launch --set=output_dir="$out" --set=training.iterations=8 --set=training.log_every=4 \
  --set=trace=true --set=worker.command="$PROGRAM && echo after-the-worker"
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! json_check "$out/summary.json" "s['status'] == 'ok' and s['iterations'] == 8 and [r['rank'] for r in s['workers_results']] == [0, 1] and s['worker_program']['results_missing'] == [] and 'note' not in s['worker_program'] and s['trace'].endswith('/trace.json')"; then
  fail "summary.json lacks the program's results or the trace"
elif ! env_check "$out/env_1_0.txt" "e['P3_TRACE_FILE'] == '$out/traces/worker_1.json'"; then
  fail "P3_TRACE_FILE is not the worker's trace path with trace = true"
elif ! grep -q '^\[p3\] iter 8/8  loss' "$output" || ! grep -q '^\[p3\] done in .*: 8 iterations' "$output"; then
  fail "rank 0's progress lines or the result line are not shown"
elif ! grep -qx 'after-the-worker' "$out/logs/worker_1.log"; then
  fail "the command did not run through /bin/sh -c (its && part is missing)"
elif ! grep -q '^worker_1 .* exit 0 .* 8 ' "$output"; then
  fail "the end table lacks the program's result"
else
  ok
fi

# --- a failing program: the first failure, with its own last words --------------------
case_name=failure
out="$TMP/failure"
FAIL_FIRST_RANK=1 launch --set=output_dir="$out" --set=worker.command="$PROGRAM"
if [[ $rc -ne 1 ]]; then
  fail "exit status $rc, expected 1"
elif ! grep -q 'FAILED: worker 1 (pid [0-9]*) exited with status 5' "$output"; then
  fail "the failure is not named"
elif ! json_check "$out/summary.json" "s['status'] == 'failed' and s['first_failure']['process'] == 'worker_1' and 'fails on purpose' in s['first_failure']['last_log_line']"; then
  fail "summary.json's first_failure is not the program"
else
  ok
fi

# --- --max_restarts: the dead program starts again with P3_REJOIN=1 -------------------
case_name=restart
out="$TMP/restart"
FAIL_FIRST_RANK=1 launch --set=output_dir="$out" --set=training.iterations=6 --max_restarts=1 \
  --set=worker.command="$PROGRAM"
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! grep -q 'worker 1 (pid [0-9]*) exited with status 5; restarting it with P3_REJOIN=1 (restart 1 of 1)' "$output"; then
  fail "the launcher does not say it restarts worker 1 with P3_REJOIN=1"
elif [[ ! -s "$out/env_1_0.txt" || -e "$out/env_0_1.txt" ]] ||
     ! env_check "$out/env_1_1.txt" "e['P3_REJOIN'] == '1' and e['P3_RANK'] == '1'"; then
  fail "the restarted program did not get P3_REJOIN=1 (or another rank did)"
elif ! json_check "$out/summary.json" "s['status'] == 'ok' and s['iterations'] == 6"; then
  fail "the run did not finish after the restart"
else
  ok
fi

# --- the command runs in the folder the launcher was invoked from -----------------------
case_name=working_folder
out="$TMP/working_folder"
mkdir -p "$TMP/invoked_here"
printf '#!/bin/sh\npwd >"$P3_RUN_DIR/pwd_$P3_RANK.txt"\nexec %s\n' "$PROGRAM" >"$TMP/invoked_here/here.sh"
chmod +x "$TMP/invoked_here/here.sh"
launcher="$PWD/$LAUNCHER" server="$PWD/tests/tools/fake_p3_server" config="$PWD/configs/default.textproto"
output="$TMP/$case_name.out"
(cd "$TMP/invoked_here" && "$launcher" --server_binary="$server" --config="$config" --plot=false \
  --set=output_dir="$out" --set=training.iterations=3 --set=worker.command=./here.sh) >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0 (./here.sh relative to the launcher's folder)"
elif [[ "$(cat "$out/pwd_1.txt" 2>/dev/null)" != "$TMP/invoked_here" ]]; then
  fail "the program ran in $(cat "$out/pwd_1.txt" 2>/dev/null), not in $TMP/invoked_here"
else
  ok
fi

# --- bad configs: the error names worker.command --------------------------------------
case_name=refused
launch --set=output_dir="$TMP/refused" --set=worker.command=' '
blank_rc=$rc blank_out=$(cat "$output")
launch --config=configs/local.textproto --set=output_dir="$TMP/refused" \
  --set=worker.command="$PROGRAM"
local_rc=$rc local_out=$(cat "$output")
launch --config=configs/pipeline_spectrain.textproto --set=output_dir="$TMP/refused" \
  --set=worker.command="$PROGRAM"
if [[ $blank_rc -ne 2 ]] || ! grep -q 'worker.command: is empty; give a shell command' <<<"$blank_out"; then
  fail "a blank worker.command is not refused naming the field (status $blank_rc): $blank_out"
elif [[ $local_rc -ne 2 ]] || ! grep -q 'worker.command: needs servers .* mode "local" has none' <<<"$local_out"; then
  fail "worker.command in mode local is not refused naming the field (status $local_rc): $local_out"
elif [[ $rc -ne 2 ]] || ! grep -q 'worker.command: needs servers .* mode "pipeline" has none' "$output"; then
  fail "worker.command in mode pipeline is not refused naming the field (status $rc)"
elif [[ -e "$TMP/refused/logs" ]]; then
  fail "a refused config started something"
else
  ok
fi

finish_cases
