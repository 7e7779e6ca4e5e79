#!/usr/bin/env bash
# One task of a Slurm job written by `launch_cluster --slurm` (docs/multihost.md).
#
# srun starts machines x tasks_per_node copies of this script with block distribution, so
# task SLURM_PROCID runs on node SLURM_PROCID / tasks_per_node. Each copy works out which
# process the config's placement puts in its slot on that node — servers first, then
# workers, in index order — and execs p3_server or p3_worker with the flags of the
# process contract (docs/launcher.md). Slots with nothing to run exit 0 at once.
#
# Servers listen on every interface ($P3_BIND_HOST, default 0.0.0.0) on an OS-chosen port
# and publish <output_dir>/ports/server_<i>.port and server_<i>.host (this node's name,
# or $P3_ADVERTISE_HOST); workers wait for those files (at most peer_timeout_s), so
# <output_dir> must be on a file system every node shares. Each process logs to
# <output_dir>/logs/<role>_<index>.log.
#
# The binary runs as this script's child (not exec'd), so that how it ended can be
# recorded in <output_dir>/results/<role>_<index>.exit.json for `launch_cluster --collect`:
#   {"process": "server_1", "node": "n2", "host": "vm", "exit_status": 0, "signal": 0,
#    "start_unix": 1764575000.123456789, "end_unix": 1764575003.987654321}
# (signal: the one that ended it, then exit_status is 0). SIGTERM, SIGINT and SIGHUP
# (scancel, the time limit, srun ending the step) are passed on to it. A task killed with
# SIGKILL records nothing; --collect then says so.
#
# With --max_restarts=N (N > 0, launch_cluster --max_restarts), a worker that ends
# with a failure is started again in the same task with --rejoin, at most N times
# (docs/reliability.md); the exit record then also says how many restarts it took.
#
# With --worker_command=COMMAND (the config's worker.command), a worker task runs COMMAND
# through /bin/sh -c instead of the worker binary, with the worker-program environment
# (P3_RANK, P3_WORLD_SIZE, P3_SERVERS, P3_CONFIG, P3_RESULT_FILE, P3_RECORDS_FILE,
# P3_TRACE_FILE, P3_REJOIN, P3_RUN_DIR; docs/worker_api.md); a restarted one gets
# P3_REJOIN=1 instead of --rejoin.
#
#   p3_slurm_task.sh --config=PATH --output_dir=DIR --workers=W --servers=S \
#       --machines=M --tasks_per_node=K --placement=colocated|separate \
#       --peer_timeout_s=SECONDS [--trace] [--max_restarts=N] --server_binary=PATH \
#       --worker_binary=PATH [--worker_command=COMMAND]
#
# With --print_role it only prints "<role> <index> <node>" (or "idle") and exits.
set -euo pipefail

die() {
  echo "p3_slurm_task: $*" >&2
  exit 2
}

config="" out="" workers="" servers="" machines="" per_node="" placement="colocated"
peer_timeout=60 trace=0 server_binary="" worker_binary="" print_role=0 max_restarts=0
worker_command=""
for arg in "$@"; do
  case "$arg" in
    --config=*) config="${arg#*=}" ;;
    --output_dir=*) out="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --servers=*) servers="${arg#*=}" ;;
    --machines=*) machines="${arg#*=}" ;;
    --tasks_per_node=*) per_node="${arg#*=}" ;;
    --placement=*) placement="${arg#*=}" ;;
    --peer_timeout_s=*) peer_timeout="${arg#*=}" ;;
    --trace) trace=1 ;;
    --max_restarts=*) max_restarts="${arg#*=}" ;;
    --server_binary=*) server_binary="${arg#*=}" ;;
    --worker_binary=*) worker_binary="${arg#*=}" ;;
    --worker_command=*) worker_command="${arg#*=}" ;;
    --print_role) print_role=1 ;;
    *) die "unknown argument: $arg" ;;
  esac
done
for name in config out workers servers machines per_node; do
  [[ -n "${!name}" ]] || die "missing --${name/out/output_dir}"
done
[[ "$max_restarts" =~ ^[0-9]+$ ]] || die "--max_restarts=$max_restarts; allowed: an integer >= 0"
[[ "$placement" == colocated || "$placement" == separate ]] ||
  die "--placement=$placement; allowed: colocated, separate"

procid="${SLURM_PROCID:?p3_slurm_task: SLURM_PROCID is unset (run it with srun)}"
ntasks="${SLURM_NTASKS:?p3_slurm_task: SLURM_NTASKS is unset (run it with srun)}"
((ntasks == machines * per_node)) ||
  die "SLURM_NTASKS=$ntasks, expected machines x tasks_per_node = $((machines * per_node))"
node=$((procid / per_node))
slot=$((procid % per_node))

# The processes placed on this node, in slot order (proto/config.h: ServerMachine,
# WorkerMachine).
roles=()
for ((i = 0; i < servers; i++)); do
  first=0
  [[ "$placement" == separate ]] && first=$workers
  (((first + i) % machines == node)) && roles+=("server $i")
done
for ((r = 0; r < workers; r++)); do
  ((r % machines == node)) && roles+=("worker $r")
done
if ((slot >= ${#roles[@]})); then
  ((print_role)) && echo "idle"
  exit 0
fi
read -r role index <<<"${roles[$slot]}"
if ((print_role)); then
  echo "$role $index $node"
  exit 0
fi

mkdir -p "$out/logs" "$out/ports" "$out/results" "$out/records" "$out/traces"
exec >"$out/logs/${role}_${index}.log" 2>&1
slurm_node="${SLURMD_NODENAME:-$(hostname)}"
echo "p3_slurm_task: task $procid of $ntasks on $(hostname) (Slurm node $slurm_node, node $node, slot $slot): $role $index"
trace_flag=()
((trace)) && trace_flag=("--trace_file=$out/traces/${role}_${index}.json")

exit_file="$out/results/${role}_${index}.exit.json"
rm -f "$exit_file"
start_unix=$(date +%s.%N)

# record_exit STATUS: writes the exit record for a wait status as bash reports it
# (128 + N: killed by signal N), atomically, and exits with STATUS.
record_exit() {
  local status="$1" exit_status="$1" signal=0
  if ((status > 128)); then
    exit_status=0
    signal=$((status - 128))
  fi
  printf '{"process": "%s_%s", "node": "%s", "host": "%s", "exit_status": %d, "signal": %d, "restarts": %d, "start_unix": %s, "end_unix": %s}\n' \
    "$role" "$index" "$slurm_node" "$(hostname)" "$exit_status" "$signal" "$restarts" \
    "$start_unix" "$(date +%s.%N)" >"$exit_file.tmp"
  mv -f "$exit_file.tmp" "$exit_file"
  exit "$status"
}

# SIGTERM, SIGINT, SIGHUP: passed on to the process once it runs (run_recorded records how
# it then ends); before that (a worker waiting for the servers' ports) recorded at once as
# this signal. A trap must not fail: under `set -e` that would end the script unrecorded.
child=""
stopping=0  # a signal came from outside: no restart
restarts=0
on_signal() {
  stopping=1
  if [[ -n "$child" ]]; then
    kill -TERM "$child" 2>/dev/null || true
  else
    record_exit $((128 + $1))
  fi
}
trap 'on_signal 15' TERM
trap 'on_signal 2' INT
trap 'on_signal 1' HUP

# run_once COMMAND...: runs the process; its wait status in $status.
run_once() {
  "$@" &
  child=$!
  while true; do
    status=0
    wait "$child" || status=$?
    # wait also returns (> 128) when a trapped signal arrives; the child may still run.
    kill -0 "$child" 2>/dev/null || break
  done
  child=""
}

# run_recorded COMMAND...: runs the process and records how it ended.
run_recorded() {
  run_once "$@"
  record_exit "$status"
}

# run_worker COMMAND...: like run_recorded, but a failed worker is started again with
# --rejoin (a worker program: with P3_REJOIN=1) while restarts are left and no signal came
# from outside.
run_worker() {
  run_once "$@"
  while ((status != 0 && !stopping && restarts < max_restarts)); do
    restarts=$((restarts + 1))
    if [[ -n "$worker_command" ]]; then
      echo "p3_slurm_task: worker $index ended with status $status; restarting it with P3_REJOIN=1 (restart $restarts of $max_restarts)"
      P3_REJOIN=1
      run_once "$@"
    else
      echo "p3_slurm_task: worker $index ended with status $status; restarting it with --rejoin (restart $restarts of $max_restarts)"
      run_once "$@" --rejoin
    fi
  done
  if ((status != 0 && max_restarts > 0 && restarts >= max_restarts && !stopping)); then
    echo "p3_slurm_task: worker $index failed again; no restarts left (--max_restarts=$max_restarts)"
  fi
  record_exit "$status"
}

if [[ "$role" == server ]]; then
  host="${P3_ADVERTISE_HOST:-$(hostname)}"
  printf '%s\n' "$host" >"$out/ports/server_$index.host.tmp"
  mv -f "$out/ports/server_$index.host.tmp" "$out/ports/server_$index.host"
  run_recorded "$server_binary" --config="$config" --server_index="$index" \
    --port_file="$out/ports/server_$index.port" --set=cluster.host="${P3_BIND_HOST:-0.0.0.0}" \
    "${trace_flag[@]}"
fi

# A worker: wait (bounded) until every server has published its host and port.
timeout_s=$((${peer_timeout%.*} + 1))
deadline=$((SECONDS + timeout_s))
addresses=()
for ((i = 0; i < servers; i++)); do
  while [[ ! -s "$out/ports/server_$i.port" || ! -s "$out/ports/server_$i.host" ]]; do
    if ((SECONDS >= deadline)); then
      echo "p3_slurm_task: server $i published no port within ${timeout_s}s" >&2
      record_exit 1
    fi
    sleep 0.2
  done
  addresses+=("$(<"$out/ports/server_$i.host"):$(<"$out/ports/server_$i.port")")
done
servers_flag=$(
  IFS=,
  echo "${addresses[*]}"
)
if [[ -n "$worker_command" ]]; then
  trace_file=""
  ((trace)) && trace_file="$out/traces/${role}_${index}.json"
  export P3_RANK="$index" P3_WORLD_SIZE="$workers" P3_SERVERS="$servers_flag" \
    P3_CONFIG="$config" P3_RESULT_FILE="$out/results/worker_$index.json" \
    P3_RECORDS_FILE="$out/records/worker_$index.csv" P3_TRACE_FILE="$trace_file" \
    P3_REJOIN=0 P3_RUN_DIR="$out"
  run_worker /bin/sh -c "$worker_command"
fi
run_worker "$worker_binary" --config="$config" --rank="$index" --servers="$servers_flag" \
  --result_file="$out/results/worker_$index.json" \
  --records_file="$out/records/worker_$index.csv" "${trace_flag[@]}"
