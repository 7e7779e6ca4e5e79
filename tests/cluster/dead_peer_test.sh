#!/usr/bin/env bash
# Real processes, real kills: when a worker or a server dies mid-run (SIGKILL), every
# other process must stop by itself with an error naming the dead peer, within a bound —
# never hang. (The launcher, which would also stop them, is not involved here.)
set -uo pipefail

SERVER=server/p3_server
WORKER=worker/p3_worker
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
BOUND_S=20   # peer_timeout_s is 5; a dead peer must be noticed well within this
failures=0
pids=()

cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

write_config() {  # $1 = file, $2 = servers
  cat > "$1" <<CFG
name: "dead_peer"
mode: "p3"
cluster { workers: 2 servers: $2 peer_timeout_s: 5 }
model { name: "small_cnn" }
data { dataset: "synthetic" synthetic_size: 2048 }
training { batch_size: 16 iterations: 1000000 log_every: 5 evaluate: false }
scheduling { slice_params: 20000 }
CFG
}

start_servers() {  # $1 = dir, $2 = count
  for ((s = 0; s < $2; s++)); do
    "$SERVER" --config="$1/c.textproto" --server_index=$s --port_file="$1/s$s.port" \
      > "$1/server_$s.log" 2>&1 &
    pids+=($!)
    eval "server_pid_$s=$!"
  done
  for ((s = 0; s < $2; s++)); do
    for _ in $(seq 100); do [ -s "$1/s$s.port" ] && break; sleep 0.1; done
    [ -s "$1/s$s.port" ] || { fail "server $s did not start"; return 1; }
  done
  addresses=""
  for ((s = 0; s < $2; s++)); do
    addresses+="${addresses:+,}127.0.0.1:$(cat "$1/s$s.port")"
  done
}

start_workers() {  # $1 = dir
  for r in 0 1; do
    "$WORKER" --config="$1/c.textproto" --rank=$r --servers="$addresses" \
      > "$1/worker_$r.log" 2>&1 &
    pids+=($!)
    eval "worker_pid_$r=$!"
  done
}

wait_progress() {  # $1 = log file: until training is under way
  for _ in $(seq 300); do grep -q 'PROGRESS iteration=10 ' "$1" && return 0; sleep 0.1; done
  fail "no progress in $1"; return 1
}

# Waits for pid $1 (a child of this shell) to exit within BOUND_S; sets rc to its exit
# code, or to "hung".
wait_exit() {
  local start=$SECONDS
  while kill -0 "$1" 2>/dev/null && ! [ -e "/proc/$1/status" -a "$(awk '/^State/{print $2}' /proc/$1/status 2>/dev/null)" = Z ]; do
    if ((SECONDS - start > BOUND_S)); then rc=hung; return; fi
    sleep 0.1
  done
  wait "$1"; rc=$?
}

expect_error_naming() {  # $1 = name, $2 = pid, $3 = log, $4 = text
  wait_exit "$2"
  if [ "$rc" = hung ]; then fail "$1 still running ${BOUND_S}s after the kill"; return; fi
  [ "$rc" -ne 0 ] || fail "$1 exited 0 after its peer died"
  grep -q "$4" "$3" || { fail "$1's log does not name '$4':"; tail -3 "$3"; }
  echo "ok: $1 exited with $rc: $(grep -v listening "$3" | grep -m1 -E 'p3_(worker|server)' | head -c 300)"
}

echo "== a worker dies =="
D="$TMP/worker_dies"; mkdir -p "$D"; write_config "$D/c.textproto" 1
start_servers "$D" 1 && start_workers "$D" && wait_progress "$D/worker_1.log" && {
  kill -9 "$worker_pid_1"
  expect_error_naming "server 0" "$server_pid_0" "$D/server_0.log" "worker 1"
  expect_error_naming "worker 0" "$worker_pid_0" "$D/worker_0.log" "worker 1"
}

echo "== a server dies =="
D="$TMP/server_dies"; mkdir -p "$D"; write_config "$D/c.textproto" 2
start_servers "$D" 2 && start_workers "$D" && wait_progress "$D/worker_0.log" && {
  kill -9 "$server_pid_1"
  # Each worker learns it from server 1's closed stream, or — when the other worker
  # noticed first and quit — from server 0's abort naming that worker.
  expect_error_naming "worker 0" "$worker_pid_0" "$D/worker_0.log" "server 1\|worker 1"
  expect_error_naming "worker 1" "$worker_pid_1" "$D/worker_1.log" "server 1\|worker 0"
  expect_error_naming "server 0" "$server_pid_0" "$D/server_0.log" "worker"
}

echo "$failures failures"
[ "$failures" -eq 0 ]
