#!/usr/bin/env bash
# Real processes: a worker stopped with SIGSTOP makes the servers and the other worker
# log, within cluster.stall_report_s, whom they wait for (the stopped rank); SIGCONT lets
# the run finish normally. Stopped for good, it ends the run within peer_timeout_s, and
# the servers' errors name its stall as what came first.
set -uo pipefail

SERVER=server/p3_server
WORKER=worker/p3_worker
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
STALL_S=1
BOUND_S=$((STALL_S + 4))  # report due after STALL_S; the rest is slack for a loaded machine
failures=0
pids=()

cleanup() { for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat > "$TMP/c.textproto" <<CFG
name: "stall"
mode: "p3"
cluster { workers: 2 servers: 2 peer_timeout_s: 60 stall_report_s: $STALL_S }
model { name: "small_cnn" }
data { dataset: "synthetic" synthetic_size: 2048 }
training { batch_size: 16 iterations: 150 log_every: 5 evaluate: false }
scheduling { slice_params: 20000 }
output { save_model: false }
CFG

# 2 servers and 2 workers on $TMP/c.textproto, logs $TMP/<prefix>server_<s>.log and
# <prefix>worker_<r>.log; sets server_pid_<s> and worker_pid_<r>; returns once worker 1 has
# done 10 iterations.
start_cluster() {
  local prefix=$1
  rm -f "$TMP"/s?.port
  for s in 0 1; do
    "$SERVER" --config="$TMP/c.textproto" --server_index=$s --port_file="$TMP/s$s.port" \
      > "$TMP/${prefix}server_$s.log" 2>&1 &
    pids+=($!)
    eval "server_pid_$s=$!"
  done
  for s in 0 1; do
    for _ in $(seq 100); do [ -s "$TMP/s$s.port" ] && break; sleep 0.1; done
    [ -s "$TMP/s$s.port" ] || { fail "server $s did not start"; exit 1; }
  done
  local addresses="127.0.0.1:$(cat "$TMP/s0.port"),127.0.0.1:$(cat "$TMP/s1.port")"
  for r in 0 1; do
    "$WORKER" --config="$TMP/c.textproto" --rank=$r --servers="$addresses" \
      > "$TMP/${prefix}worker_$r.log" 2>&1 &
    pids+=($!)
    eval "worker_pid_$r=$!"
  done
  local log="$TMP/${prefix}worker_1.log"
  for _ in $(seq 600); do grep -q 'PROGRESS iteration=10 ' "$log" && break; sleep 0.1; done
  grep -q 'PROGRESS iteration=10 ' "$log" || { fail "no progress"; tail "$TMP"/*.log; exit 1; }
}

start_cluster ""

# Only what is logged after the stop counts: on a loaded machine a start-up wait may
# already have named any rank.
declare -A before_stop
for log in server_0.log server_1.log worker_0.log; do
  before_stop[$log]=$(wc -l < "$TMP/$log")
done
since_stop() { tail -n +$((${before_stop[$1]} + 1)) "$TMP/$1"; }
kill -STOP "$worker_pid_1"
stopped_ms=$(date +%s%3N)
# Each line that must appear, with the log it must appear in.
declare -A want=(
  ["server_0.log"]='^\[stall\] server 0: waited .* for the gradients of iteration [0-9]+: .*worker 1 \('
  ["server_1.log"]='^\[stall\] server 1: waited .* for the gradients of iteration [0-9]+: .*worker 1 \('
  ["worker_0.log"]='^\[stall\] worker 0: server [01] has waited .* from worker 1$'
)
for log in "${!want[@]}"; do
  found=""
  for _ in $(seq $((BOUND_S * 10))); do
    if since_stop "$log" | grep -qE "${want[$log]}"; then found=1; break; fi
    sleep 0.1
  done
  elapsed_ms=$(( $(date +%s%3N) - stopped_ms ))
  elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
  if [ -n "$found" ]; then
    echo "ok: $log after ${elapsed}s: $(since_stop "$log" | grep -m1 -E "${want[$log]}" | head -c 300)"
  else
    fail "$log names no stall of worker 1 within ${BOUND_S}s:"; tail -5 "$TMP/$log"
  fi
done
# Worker 0's own wait names the server and block it waits on.
if since_stop worker_0.log | grep -qE '^\[stall\] worker 0: waited .* for version [0-9]+ of (block [0-9]+ \(.*\)|every block): server [01]'; then
  echo "ok: $(since_stop worker_0.log | grep -m1 -E '^\[stall\] worker 0: waited' | head -c 300)"
else
  fail "worker 0 does not say which server's values it waits for"; tail -5 "$TMP/worker_0.log"
fi
# The stopped rank is the one the servers name. A server may be an iteration ahead of the
# other (it has every gradient of the stuck iteration) and then wait for both workers:
# worker 0 cannot go on before the other server's values, which wait for worker 1. So
# worker 0 may be named only together with worker 1, and some server names worker 1 alone.
server_lines() { { since_stop server_0.log; since_stop server_1.log; } | grep -E '^\[stall\] server'; }
if server_lines | grep 'worker 0 (' | grep -qv 'worker 1 ('; then
  fail "a server names worker 0 without worker 1, the stopped rank"
fi
if server_lines | grep -qE 'for the gradients of iteration [0-9]+: worker 1 \('; then
  echo "ok: a server names worker 1 alone"
else
  fail "no server names worker 1 alone"
fi

kill -CONT "$worker_pid_1"
for r in 0 1; do
  eval "pid=\$worker_pid_$r"
  wait "$pid"; rc=$?
  [ "$rc" -eq 0 ] && echo "ok: worker $r finished after SIGCONT" ||
    { fail "worker $r exited $rc after SIGCONT"; tail -5 "$TMP/worker_$r.log"; }
done
for p in "${pids[@]:0:2}"; do wait "$p" || fail "a server exited $?"; done

# Worker 1 stopped for good, peer_timeout_s 3: worker 0 gives up waiting and leaves, and a
# server, which sees only worker 0 leave, says that worker 1's stall came first. As above, a
# server may be an iteration ahead (worker 1 was stopped after sending it every gradient of
# an iteration): it then waits for both workers, its last stall report names both, and it
# says only that worker 0 left. At least one server is not ahead.
sed -i 's/peer_timeout_s: 60/peer_timeout_s: 3/' "$TMP/c.textproto"
start_cluster late_
kill -STOP "$worker_pid_1"
came_first=0
for s in 0 1; do
  eval "pid=\$server_pid_$s"
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    fail "server $s still running 30 s after worker 1 stopped (peer_timeout_s 3)"
    continue
  fi
  line=$(grep -E "^p3_server $s: " "$TMP/late_server_$s.log" | tail -1)
  last_stall=$(grep -E "^\[stall\] server $s: " "$TMP/late_server_$s.log" | tail -1)
  if echo "$line" | grep -qE 'worker 0 disconnected before it was done, after this server had waited [0-9.]+m?s for the gradients of iteration [0-9]+ from worker 1 \(the stall came first\)'; then
    echo "ok: server $s: $line"
    came_first=$((came_first + 1))
  elif echo "$line" | grep -qE 'worker 0 disconnected before it was done$' &&
       echo "$last_stall" | grep 'worker 0 (' | grep -q 'worker 1 ('; then
    echo "ok: server $s was an iteration ahead, waiting for both workers ($last_stall): $line"
  else
    fail "server $s does not say that worker 1's stall came first: $line (its last stall report: $last_stall)"
  fi
done
[ "$came_first" -ge 1 ] || fail "no server says that worker 1's stall came first"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
