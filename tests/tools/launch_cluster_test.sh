#!/usr/bin/env bash
# End-to-end tests of //tools:launch_cluster with the fake server and worker
# (tests/tools/fake_p3_server.cc, tests/tools/fake_p3_worker.cc). Each case checks the exit status,
# the files written, the messages printed, and that no process was left behind.
# Runs from the runfiles tree (bazel test), where the paths below are relative.
set -uo pipefail

source tests/testing/cases.sh

LAUNCHER=tools/launch_cluster
TMP="${TEST_TMPDIR:-$(mktemp -d)}"


# Runs the launcher with the fakes; output (stdout + stderr) goes to $output, the exit
# status to $rc.
launch() {
  output="$TMP/$case_name.out"
  # No curves (a python start per run) unless a case asks for them with --plot=true.
  "$LAUNCHER" --server_binary=tests/tools/fake_p3_server --worker_binary=tests/tools/fake_p3_worker \
    --kill_grace_s=2 --plot=false "$@" >"$output" 2>&1
  rc=$?
}

# Every process in the launcher's final table ($output) no longer exists. Prints how
# many processes the table lists as started.
started_count=0
no_process_left() {
  local name pid
  started_count=0
  while read -r name pid; do
    started_count=$((started_count + 1))
    # (A child the launcher forgot would still get SIGKILL when the launcher exited,
    # through PR_SET_PDEATHSIG; this checks the launcher's own stopping.)
    if ((pid > 1)) && kill -0 "$pid" 2>/dev/null; then
      echo "process $pid ($name) is still running"
      return 1
    fi
  done < <(sed -n 's/^\(\(server\|worker\)_[0-9][0-9]*\)  *\([1-9][0-9]*\) .*/\1 \3/p' "$output")
}


# --- everything succeeds: outputs, summary.json, progress lines -----------------------
case_name=success
out_dir="$TMP/success"
launch --config=configs/default.textproto --plot=true \
  --set=output_dir="$out_dir" --set=training.iterations=12 --set training.log_every=4 \
  --set=name=ok_run
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! json_check "$out_dir/summary.json" \
    's["name"] == "ok_run" and s["mode"] == "p3" and s["model"] == "small_cnn" and s["workers"] == 2 and s["servers"] == 2 and s["batch_size_per_worker"] == 32 and s["iterations"] == 12 and s["samples_per_second"] == 6400 and s["test_accuracy"] == 0.75 and s["param_l2"] == 12.5 and "final_loss" in s and "wall_seconds" in s and s["config"].endswith("/config.textproto") and [r["rank"] for r in s["workers_results"]] == [0, 1]'; then
  fail "summary.json lacks the expected fields"
elif ! grep -q '^training {' "$out_dir/config.textproto" ||
     ! grep -q 'iterations: 12' "$out_dir/config.textproto"; then
  fail "config.textproto is not the resolved config"
elif [[ ! -s "$out_dir/logs/server_0.log" || ! -s "$out_dir/logs/server_1.log" ||
        ! -s "$out_dir/logs/worker_1.log" ]]; then
  fail "a process log is missing"
elif ! grep -q '^PROGRESS iteration=12 total=12 ' "$out_dir/logs/worker_0.log"; then
  fail "rank 0's stdout did not go to its log"
elif ! head -1 "$out_dir/records/worker_0.csv" | grep -qx 'iteration,loss,iteration_seconds,samples_per_second'; then
  fail "records file missing"
elif /usr/bin/python3 -c 'import matplotlib' 2>/dev/null &&
     { ! grep -q "^\[p3\] curves: $out_dir/curves.png" "$output" ||
       [[ "$(head -c 8 "$out_dir/curves.png" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]]; }; then
  fail "curves.png was not drawn beside summary.json"
elif ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null &&
     ! grep -q '^\[p3\] no curves drawn: .*matplotlib' "$output"; then
  fail "a missing matplotlib is not reported"
elif ! grep -q '^\[p3\] iter 4/12  loss' "$output" || ! grep -q '^\[p3\] iter 12/12  loss' "$output"; then
  fail "progress lines missing"
elif ! grep -q '^\[p3\] iter 4/12  loss [0-9.]*  6400 samples/s  sent 250 Mbit/s  received 125 Mbit/s  elapsed' "$output"; then
  fail "the progress line does not show rank 0's traffic rates"
elif [[ -e "$out_dir/trace.json" || -e "$out_dir/traces" ]]; then
  fail "traces were written although the config does not ask for them"
elif ! grep -q '^worker_1 .* exit 0 .* 12 ' "$output"; then
  fail "final table missing"
elif ! no_process_left || [[ $started_count -ne 4 ]]; then
  fail "a process was left behind, or the table lists $started_count processes, not 4"
else
  ok
fi

# --- PROGRESS lines without the traffic fields (older binaries) still show --------------
case_name=progress_without_rates
out_dir="$TMP/progress_without_rates"
FAKE_P3_WORKER_NO_RATES=1 launch --config=configs/default.textproto --set=output_dir="$out_dir" \
  --set=training.iterations=8 --set=training.log_every=4
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! grep -q '^\[p3\] iter 8/8  loss [0-9.]*  6400 samples/s  elapsed [0-9]*s  workers 8 [048]$' "$output"; then
  fail "a progress line without rates is not shown"
elif grep -q 'Mbit/s' "$output"; then
  fail "rates shown although the workers printed none"
else
  ok
fi

# --- trace: true: every process records a trace, the launcher merges them ---------------
case_name=trace
out_dir="$TMP/trace"
launch --config=configs/default.textproto --set=output_dir="$out_dir" \
  --set=training.iterations=4 --set=trace=true
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif [[ ! -s "$out_dir/traces/server_0.json" || ! -s "$out_dir/traces/server_1.json" ||
        ! -s "$out_dir/traces/worker_0.json" || ! -s "$out_dir/traces/worker_1.json" ]]; then
  fail "a process did not get --trace_file=<output_dir>/traces/<role>_<i>.json"
elif ! json_check "$out_dir/trace.json" \
    'sorted({e["pid"] for e in s["traceEvents"]}) == [100, 101, 200, 201] and len(s["traceEvents"]) == 14 and sorted(e["args"]["name"] for e in s["traceEvents"] if e["name"] == "process_name") == ["server 0", "server 1", "worker 0", "worker 1"] and all(e["dur"] >= 0 for e in s["traceEvents"] if e["ph"] == "X") and s["otherData"]["merged_files"] == 4'; then
  fail "trace.json does not hold every process's events and metadata"
elif ! json_check "$out_dir/summary.json" 's["trace"] == sys.argv[3]' "$out_dir/trace.json"; then
  fail "summary.json does not name the trace"
elif ! grep -q '^\[p3\] merged the traces: 14 events from 4 process(es); open trace.json in https://ui.perfetto.dev' "$output" ||
     ! grep -q "^\[p3\] trace: $out_dir/trace.json\$" "$output"; then
  fail "the trace's path is not printed"
else
  ok
fi

# --- local mode: one worker, no servers, --servers empty -------------------------------
case_name=local
out_dir="$TMP/local"
launch --config=configs/local.textproto --set=output_dir="$out_dir" \
  --set=training.iterations=3 --set=training.evaluate=false
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! json_check "$out_dir/summary.json" \
    's["mode"] == "local" and s["worker_processes"] == 1 and s["server_processes"] == 0 and s["global_batch_size"] == 64 and s["test_accuracy"] is None and len(s["workers_results"]) == 1'; then
  fail "summary.json of the local run is wrong"
elif ls "$out_dir/logs" | grep -q server; then
  fail "a server was started in mode local"
else
  ok
fi

# --- a pipeline config runs: the launcher becomes pipeline_train on it -----------------
case_name=pipeline_runs
out_dir="$TMP/pipeline_runs"
launch --config=configs/pipeline_spectrain.textproto --set=output_dir="$out_dir" \
  --set=training.iterations=4 --set=training.evaluate=false --set=data.dataset=synthetic \
  --set=data.synthetic_size=256
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^\[p3\] mode pipeline: .*pipeline_train --config=' "$output"; then
  fail "the launcher does not say what it runs"
elif ! json_check "$out_dir/summary.json" 's["iterations"] == 4 and s["weights"] == "spectrain" and s["stages"] == 2'; then
  fail "summary.json is not the pipeline's result"
elif [[ ! -s "$out_dir/epochs.csv" ]]; then
  fail "no epochs.csv beside it"
else
  ok
fi

# --- what does not apply to a pipeline is refused before anything starts ----------------
case_name=pipeline_refused
out_dir="$TMP/pipeline_refused"
launch --config=configs/pipeline_spectrain.textproto --set=output_dir="$out_dir" --max_restarts=1
if [[ $rc -ne 2 ]]; then
  fail "exit status $rc, expected 2"
elif ! grep -q 'mode "pipeline" runs in one process on this machine: --max_restarts' "$output"; then
  fail "the refusal does not say why"
elif [[ -e "$out_dir" ]]; then
  fail "something was started or written for a refused config"
else
  ok
fi

# --- a worker fails: the others are stopped, the failure and its log are shown --------
case_name=worker_fails
out_dir="$TMP/worker_fails"
# Rank 0 is still iterating (200 ms each) when it is stopped: had it finished, it could
# exit 0 on its own when the stopped servers close its connections.
FAKE_P3_WORKER_FAIL_RANK=1 FAKE_P3_WORKER_ITERATION_MS=200 launch --config=configs/default.textproto --set=output_dir="$out_dir" \
  --set=training.iterations=5
if [[ $rc -ne 1 ]]; then
  fail "exit status $rc, expected 1"
elif ! grep -q 'FAILED: worker 1 (pid [0-9]*) exited with status 3' "$output"; then
  fail "the failed process is not named"
elif ! grep -q 'injected failure on rank 1' "$output"; then
  fail "the tail of the failed process's log is not shown"
elif ! grep -q 'stopping server_0, server_1, worker_0 (SIGTERM)' "$output"; then
  fail "the other processes were not stopped"
elif [[ $(grep -c '^\(server_[01]\|worker_0\) .* signal 15 (Terminated)' "$output") -ne 3 ]]; then
  fail "the table does not show the three others stopped by SIGTERM"
elif ! json_check "$out_dir/summary.json" \
    's["status"] == "failed" and s["first_failure"]["process"] == "worker_1" and s["first_failure"]["status"] == "exit 3" and [p["outcome"] for p in s["processes"]] == ["stopped after the first failure"] * 2 + ["stopped after the first failure", "first failure"]'; then
  fail "summary.json of the failed run does not name worker 1 as the first failure"
elif ! grep -q '^\[p3\] first failure: worker 1 (exit 3) after [0-9.e-]* s: fake_p3_worker: injected failure on rank 1$' "$output" ||
     ! grep -q '^\[p3\]   stopped after the first failure: server_0, server_1, worker_0$' "$output"; then
  fail "the report does not tell the first failure from the processes stopped after it"
elif ! no_process_left; then
  fail "a process was left behind"
elif [[ $started_count -ne 4 ]]; then
  fail "the table lists $started_count started processes, not 4"
else
  ok
fi

# --- a server dies mid-run: it is the first failure, the others' errors follow from it ---
case_name=server_dies
out_dir="$TMP/server_dies"
# Server 1 kills itself (SIGKILL) 100 ms after both workers connected; the workers find
# its connection closed at their next iteration (50 ms each) and exit 1 naming it, and
# server 0 exits 1 when a worker disconnects: follow-on errors, or stopped by the
# launcher first.
FAKE_P3_SERVER_DIE_INDEX=1 FAKE_P3_SERVER_DIE_AFTER_MS=100 FAKE_P3_SERVER_ABORT_ON_DISCONNECT=1 \
  FAKE_P3_WORKER_ITERATION_MS=50 launch --config=configs/default.textproto \
  --set=output_dir="$out_dir" --set=training.iterations=100
if [[ $rc -ne 1 ]]; then
  fail "exit status $rc, expected 1"
elif ! grep -q 'FAILED: server 1 (pid [0-9]*) was killed by signal 9 (Killed)' "$output" ||
     ! grep -q '^\[p3\] first failure: server 1 (signal 9 (Killed)) after ' "$output"; then
  fail "the dead server is not named as the first failure"
elif grep -q '^\[p3\] first failure: \(worker\|server 0\)' "$output"; then
  fail "a follow-on error is reported as the first failure"
elif ! json_check "$out_dir/summary.json" \
    's["first_failure"]["process"] == "server_1" and all(p["outcome"] in ("follow-on failure", "stopped after the first failure") for p in s["processes"] if p["name"] != "server_1") and all(f["process"] != "server_1" for f in s["follow_on_failures"])'; then
  fail "summary.json does not name server 1 as the first failure and the others as following"
elif ! no_process_left; then
  fail "a process was left behind"
else
  ok
fi

# --- a straggler: the summary names the slowest worker, compute and wait per iteration ---
case_name=straggler
out_dir="$TMP/straggler"
FAKE_P3_WORKER_SLOW_RANK=1 FAKE_P3_WORKER_ITERATION_MS=20 launch --config=configs/default.textproto \
  --set=output_dir="$out_dir" --set=training.iterations=8 --set=training.log_every=4
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! grep -q '^\[p3\] slowest worker (per iteration): worker 1, 0.03 s compute + 0 s waiting (fastest: worker 0, 0.01 s compute + 0.02 s waiting)$' "$output"; then
  fail "the straggler line is missing or wrong"
elif ! json_check "$out_dir/summary.json" \
    's["straggler"] == {"rank": 1, "iterations": 8, "iteration_seconds": 0.03, "compute_seconds": 0.03, "wait_seconds": 0.0} and [t["rank"] for t in s["worker_timing"]] == [0, 1] and s["worker_timing"][0]["wait_seconds"] == 0.02'; then
  fail "summary.json lacks the straggler or the workers' timing"
elif ! grep -q '^\[p3\] iter 8/8  .*  workers 8 [048]$' "$output"; then
  fail "the progress line does not show every worker's iteration"
else
  ok
fi

# --- a server never publishes its port: clear error after cluster.peer_timeout_s -------
case_name=server_no_port
out_dir="$TMP/server_no_port"
FAKE_P3_SERVER_MODE=no_port FAKE_P3_SERVER_IGNORE_SIGTERM=1 \
  launch --config=configs/default.textproto --set=output_dir="$out_dir" \
  --set=cluster.peer_timeout_s=0.5 --kill_grace_s=0.5
if [[ $rc -ne 1 ]]; then
  fail "exit status $rc, expected 1"
elif ! grep -q 'server 0 (pid [0-9]*) did not write its port file .*server_0.port within cluster.peer_timeout_s = 500ms' "$output"; then
  fail "the missing server is not named"
elif ls "$out_dir/logs" | grep -q worker; then
  fail "workers were started without servers"
elif ! grep -q 'server_0 did not stop; sending SIGKILL' "$output" ||
     [[ $(grep -c '^server_[01] .* signal 9 (Killed)' "$output") -ne 2 ]]; then
  fail "servers ignoring SIGTERM were not killed with SIGKILL"
elif ! no_process_left || [[ $started_count -ne 2 ]]; then
  fail "a process was left behind, or the table lists $started_count processes, not 2"
else
  ok
fi

# --- a server fails at start --------------------------------------------------------------
case_name=server_fails
out_dir="$TMP/server_fails"
FAKE_P3_SERVER_MODE=fail launch --config=configs/default.textproto --set=output_dir="$out_dir"
if [[ $rc -ne 1 ]]; then
  fail "exit status $rc, expected 1"
elif ! grep -q 'FAILED: server [01] (pid [0-9]*) exited with status 1' "$output" ||
     ! grep -q 'injected failure (FAKE_P3_SERVER_MODE=fail)' "$output"; then
  fail "the failed server is not named with its log"
else
  ok
fi

# --- SIGTERM to the launcher stops every child ------------------------------------------
case_name=sigterm
out_dir="$TMP/sigterm"
output="$TMP/$case_name.out"
FAKE_P3_WORKER_MODE=hang "$LAUNCHER" --server_binary=tests/tools/fake_p3_server --worker_binary=tests/tools/fake_p3_worker \
  --config=configs/default.textproto --set=output_dir="$out_dir" >"$output" 2>&1 &
launcher_pid=$!
# Wait (bounded) until all four processes run and both workers have connected.
for _ in $(seq 1 300); do
  [[ $(grep -l 'connected to 2 servers' "$out_dir"/logs/worker_*.log 2>/dev/null | wc -l) -eq 2 ]] && break
  sleep 0.1
done
kill -TERM "$launcher_pid"
wait "$launcher_pid"
rc=$?
if [[ $rc -ne 143 ]]; then
  fail "exit status $rc, expected 143 (128 + SIGTERM)"
elif ! grep -q 'interrupted by SIGTERM' "$output"; then
  fail "the interruption is not reported"
elif [[ $(grep -c '^\(server\|worker\)_[01] .* signal 15 (Terminated)' "$output") -ne 4 ]]; then
  fail "the table does not show the four processes stopped by SIGTERM"
elif ! no_process_left; then
  fail "a process was left behind"
elif [[ $started_count -ne 4 ]]; then
  fail "the table lists $started_count started processes, not 4"
else
  ok
fi

# --- config errors stop everything before any process starts ----------------------------
case_name=bad_config
out_dir="$TMP/bad_config"
launch --config=configs/default.textproto --set=output_dir="$out_dir" --set=cluster.workers=65
if [[ $rc -ne 2 ]]; then
  fail "exit status $rc, expected 2"
elif ! grep -q 'cluster.workers: 65 is out of range; allowed 1..64' "$output"; then
  fail "the bad field is not named"
elif [[ -e "$out_dir" ]]; then
  fail "the output folder was created"
else
  ok
fi

case_name=bad_override_path
launch --config=configs/default.textproto --set=training.batchsize=3
if [[ $rc -ne 2 ]] || ! grep -q 'training.batchsize: unknown field; allowed in training: batch_size' "$output"; then
  fail "exit status $rc; the unknown override path is not named"
else
  ok
fi

case_name=missing_config
launch --config=configs/does_not_exist.textproto
if [[ $rc -ne 2 ]] || ! grep -q 'does_not_exist.textproto: cannot open the config file' "$output"; then
  fail "exit status $rc; the missing file is not named"
else
  ok
fi

case_name=missing_binary
"$LAUNCHER" --worker_binary=tests/tools/no_such_worker --server_binary=tests/tools/fake_p3_server \
  --set=output_dir="$TMP/missing_binary" >"$TMP/$case_name.out" 2>&1
rc=$?
output="$TMP/$case_name.out"
if [[ $rc -ne 2 ]] || ! grep -q -- '--worker_binary: .*no_such_worker is not an executable file' "$output"; then
  fail "exit status $rc; the missing binary is not named"
else
  ok
fi

# --- network checks that need no root ---------------------------------------------------
case_name=check_network_without_network
launch --config=configs/default.textproto --check_network
if [[ $rc -ne 2 ]] || ! grep -q -- '--check_network: the config emulates no network (network.bandwidth_gbps is 0)' "$output"; then
  fail "exit status $rc; a check without a network is not refused clearly"
else
  ok
fi

case_name=network_with_hosts
printf 'localhost\n' >"$TMP/hosts.txt"
launch --config=configs/default.textproto --hosts="$TMP/hosts.txt" --set=network.bandwidth_gbps=1
if [[ $rc -ne 2 ]] || ! grep -q 'with --hosts the hosts. own network is used: set network.bandwidth_gbps=0' "$output"; then
  fail "exit status $rc; emulation with --hosts is not refused"
else
  ok
fi

case_name=network_with_kubernetes
launch --config=configs/p3_1gbps.textproto --kubernetes --set=output_dir="$TMP/kube_net"
if [[ $rc -ne 2 ]] || ! grep -q 'with --kubernetes the hosts. own network is used' "$output"; then
  fail "exit status $rc; emulation with --kubernetes is not refused"
else
  ok
fi

case_name=max_restarts_refused
launch --config=configs/local.textproto --max_restarts=1 --set=output_dir="$TMP/restart_local"
if [[ $rc -ne 2 ]] || ! grep -q 'max_restarts needs servers for a restarted worker to rejoin' "$output"; then
  fail "exit status $rc; --max_restarts in mode local is not refused"
else
  launch --config=configs/default.textproto --max_restarts=-1 --set=output_dir="$TMP/restart_neg"
  if [[ $rc -ne 2 ]] || ! grep -q 'max_restarts=-1 is out of range' "$output"; then
    fail "exit status $rc; --max_restarts=-1 is not refused"
  else
    # An elastic run restarts from checkpoints only (no rejoins): refused without them.
    launch --config=configs/default.textproto --max_restarts=1 \
      --set=output_dir="$TMP/restart_elastic" --set=cluster.elastic.max_workers=3
    if [[ $rc -ne 2 ]] || ! grep -q 'max_restarts with cluster.elastic restarts every process from checkpoints' "$output"; then
      fail "exit status $rc; --max_restarts of an elastic run without checkpoints is not refused"
    else
      ok
    fi
  fi
fi

# --- every ready config loads (generating manifests runs nothing but validates) ---------
case_name=ready_configs
bad=""
for config in configs/*.textproto; do
  # Pipeline configs run one process, not a cluster: no manifests (case pipeline_runs).
  [[ $config == configs/pipeline_* ]] && continue
  "$LAUNCHER" --config="$config" --kubernetes --set=output_dir="$TMP/ready" \
    --set=network.bandwidth_gbps=0 \
    >"$TMP/ready.out" 2>&1 || bad="$bad $config"
done
output="$TMP/ready.out"
if [[ -n "$bad" ]]; then
  fail "these configs do not load:$bad"
elif ! grep -q 'bandwidth_gbps: 1' configs/p3_1gbps.textproto; then
  fail "configs/p3_1gbps.textproto does not emulate 1 Gbit/s links"
else
  ok
fi

# --- slice_params 0: the simulator chooses before the processes start, every process
# --- gets the choice, summary.json has the search -------------------------------------
case_name=auto_slice
out_dir="$TMP/auto_slice"
# ResNet-50 at batch 8 has a committed profile (configs/sim/profiles/resnet50_b8_cpu.json).
launch --config=configs/default.textproto --set=output_dir="$out_dir" \
  --set=training.iterations=2 --set=model.name=resnet50 --set=model.image_size=32 \
  --set=data.dataset=synthetic --set=training.batch_size=8 --set=scheduling.slice_params=0
chosen=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["tuning"]["slice_params"])' \
  "$out_dir/summary.json" 2>/dev/null)
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! json_check "$out_dir/summary.json" \
    '(lambda t: t["searched"] and t["slice_params_auto"] and not t["credit_bytes_auto"] and [g["slice_params"] for g in t["grid"]] == [10000, 20000, 40000, 80000, 160000, 320000, 640000, 1000000] and all(g["credit_bytes"] == 0 and g["samples_per_second"] > 0 for g in t["grid"]) and t["slice_params"] in [g["slice_params"] for g in t["grid"]] and t["predicted_samples_per_second"] >= 0.99 * max(g["samples_per_second"] for g in t["grid"]) and t["profile"].endswith("configs/sim/profiles/resnet50_b8_cpu.json") and t["calibration"].endswith("configs/sim/calibration_cpu.json") and t["credit_bytes"] == 0)(s["tuning"])'; then
  fail "summary.json has no or a wrong \"tuning\""
elif [[ -z "$chosen" || "$chosen" == 0 ]]; then
  fail "no concrete slice size chosen: '$chosen'"
elif [[ $(grep -l "^fake_p3_\(server\|worker\) [01]: scheduling slice_params $chosen credit_bytes 0\$" \
          "$out_dir"/logs/{server_0,server_1,worker_0,worker_1}.log | wc -l) -ne 4 ]]; then
  fail "not every process got slice_params $chosen"
elif ! grep -q "^  slice_params: $chosen\$" "$out_dir/config.textproto" ||
     ! grep -q "^# --set=scheduling.slice_params=$chosen (automatic" "$out_dir/config.textproto"; then
  fail "the resolved config does not hold the choice"
elif ! grep -q '^\[p3\] automatic scheduling.slice_params: 8 points simulated in ' "$output" ||
     [[ $(grep -c '^\[p3\]   *[0-9][0-9]*  *0  *[0-9.]*' "$output") -ne 8 ]] ||
     ! grep -q "^\[p3\]  *$chosen  *0  *[0-9.]*  <- chosen" "$output" ||
     ! grep -q "^\[p3\] chosen: slice_params $chosen, credit_bytes 0 (given to every process)\$" "$output"; then
  fail "the search's table is not printed"
else
  ok
fi

# --- no profile for the model: the defaults, and why; credit_bytes -1 alike -----------
# Every zoo model has a profile at its configs' image size; ResNet-50 has none at 64 x 64.
case_name=auto_without_profile
out_dir="$TMP/auto_without_profile"
launch --config=configs/default.textproto --set=output_dir="$out_dir" \
  --set=model.name=resnet50 --set=model.image_size=64 --set=model.in_channels=3 \
  --set=training.iterations=2 --set=scheduling.slice_params=0 --set=scheduling.credit_bytes=-1
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! grep -q '^\[p3\] automatic scheduling.slice_params and scheduling.credit_bytes: not searched (no simulator profile for model "resnet50" in .*configs/sim/profiles (resnet50_b<batch>_i64_cpu.json; .*); the defaults: slice_params 40000, credit_bytes 0$' "$output"; then
  fail "the fallback is not explained"
elif [[ $(grep -l "^fake_p3_\(server\|worker\) [01]: scheduling slice_params 40000 credit_bytes 0\$" \
          "$out_dir"/logs/{server_0,server_1,worker_0,worker_1}.log | wc -l) -ne 4 ]]; then
  fail "not every process got the defaults"
elif ! json_check "$out_dir/summary.json" \
    's["tuning"]["searched"] is False and s["tuning"]["slice_params"] == 40000 and s["tuning"]["credit_bytes"] == 0 and "resnet50" in s["tuning"]["reason"] and "grid" not in s["tuning"]'; then
  fail "summary.json's \"tuning\" does not record the fallback"
else
  ok
fi

# --- slice_params absent (configs/default.textproto): automatic as the default -------
# The success run above: small_cnn has a committed profile, so the simulator chose; every
# process got the choice; no online search (only an explicit 0 turns it on).
case_name=absent_is_automatic
out_dir="$TMP/success"
output="$TMP/success.out"
chosen=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["tuning"]["slice_params"])' \
  "$out_dir/summary.json" 2>/dev/null)
if ! json_check "$out_dir/summary.json" \
    '(lambda t: t["searched"] and t["slice_params_auto"] and t["slice_params_absent"] and len(t["grid"]) == 8 and t["profile"].endswith("configs/sim/profiles/small_cnn_b32_cpu.json") and "online_search" not in t)(s["tuning"])'; then
  fail "summary.json's \"tuning\" does not record the default's search"
elif [[ -z "$chosen" || "$chosen" == 0 ]]; then
  fail "no concrete slice size chosen: '$chosen'"
elif [[ $(grep -l "^fake_p3_\(server\|worker\) [01]: scheduling slice_params $chosen credit_bytes 0\$" \
          "$out_dir"/logs/{server_0,server_1,worker_0,worker_1}.log | wc -l) -ne 4 ]]; then
  fail "not every process got slice_params $chosen"
elif ! grep -q "^  slice_params: $chosen\$" "$out_dir/config.textproto" ||
     grep -q "online_search" "$out_dir/config.textproto"; then
  fail "the resolved config does not hold the choice, or turns the online search on"
elif ! grep -q '^\[p3\] automatic scheduling.slice_params (absent: the default): 8 points simulated in ' "$output" ||
     grep -q '^\[p3\] online search' "$output"; then
  fail "the default's search is not printed as such"
else
  ok
fi

# --- an explicit slice_params: exactly it, no search, no "tuning" in summary.json; the
# --- resolved config still states the packs' default (bench_throughput reads it there) --
case_name=no_auto
out_dir="$TMP/no_auto"
launch --config=configs/default.textproto --set=output_dir="$out_dir" \
  --set=training.iterations=2 --set=scheduling.slice_params=40000
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc, expected 0"
elif ! json_check "$out_dir/summary.json" '"tuning" not in s' ||
     grep -q 'automatic scheduling' "$output"; then
  fail "a run with fixed values has a search"
elif [[ $(grep -l "^fake_p3_\(server\|worker\) [01]: scheduling slice_params 40000 credit_bytes 0\$" \
          "$out_dir"/logs/{server_0,server_1,worker_0,worker_1}.log | wc -l) -ne 4 ]]; then
  fail "not every process got slice_params 40000"
elif ! grep -q '^  pack_params: 65536$' "$out_dir/config.textproto"; then
  fail "the resolved config of a run without tuning does not state pack_params 65536"
else
  ok
fi

finish_cases
