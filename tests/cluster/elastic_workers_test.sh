#!/usr/bin/env bash
# Elastic membership with real p3_worker processes (docs/reliability.md, "Elastic
# membership"): ranks 0 and 1 start, rank 2 starts mid-run with --elastic_join and appends
# `join 2` to the requests file once connected, rank 0 adds it; then `leave 2` is appended
# (as launch_cluster --elastic_control does) and rank 2 leaves and exits 0. Every process
# exits 0, every worker's result records the 2 -> 3 -> 2 membership, and ranks 0 and 1
# end with the same parameters.
set -uo pipefail

SERVER=server/p3_server
WORKER=worker/p3_worker
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
D="$TMP/elastic"; mkdir -p "$D"
REQ="$D/membership_requests"
failures=0
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat > "$D/c.textproto" <<CFG
name: "elastic_workers"
mode: "p3"
cluster { workers: 2 servers: 2 peer_timeout_s: 60 elastic { max_workers: 3 } }
model { name: "small_cnn" }
data { dataset: "synthetic" synthetic_size: 512 }
training { batch_size: 8 iterations: 1500 log_every: 5 evaluate: false }
scheduling { slice_params: 20000 }
CFG

for s in 0 1; do
  "$SERVER" --config="$D/c.textproto" --server_index=$s --port_file="$D/s$s.port" \
    > "$D/server_$s.log" 2>&1 &
  pids+=($!)
  eval "server_pid_$s=$!"
done
for s in 0 1; do
  for _ in $(seq 300); do [ -s "$D/s$s.port" ] && break; sleep 0.1; done
  [ -s "$D/s$s.port" ] || { fail "server $s did not start"; cat "$D/server_$s.log"; exit 1; }
done
addresses="127.0.0.1:$(cat "$D/s0.port"),127.0.0.1:$(cat "$D/s1.port")"

start_worker() {  # $1 = rank, then extra flags
  local r=$1; shift
  "$WORKER" --config="$D/c.textproto" --rank=$r --servers="$addresses" \
    --membership_requests="$REQ" --result_file="$D/worker_$r.json" "$@" \
    > "$D/worker_$r.log" 2>&1 &
  pids+=($!)
  eval "worker_pid_$r=$!"
}
wait_for() {  # $1 = file, $2 = pattern, $3 = seconds
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "no '$2' in $1 within $3 s"
  for f in "$D"/*.log; do echo "== $f"; tail -3 "$f"; done
  exit 1
}

start_worker 0
start_worker 1
wait_for "$D/worker_0.log" 'PROGRESS iteration=20 ' 120
start_worker 2 --elastic_join
wait_for "$D/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1, 2' 120
wait_for "$D/worker_2.log" 'PROGRESS' 120
echo "leave 2" >> "$REQ"
wait_for "$D/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1$' 120

for name in worker_pid_0 worker_pid_1 worker_pid_2 server_pid_0 server_pid_1; do
  pid=${!name}
  wait "$pid"; rc=$?
  [ "$rc" -eq 0 ] || fail "$name exited $rc"
done
grep -h MEMBERSHIP "$D"/worker_*.log
for r in 0 1 2; do
  python3 - "$D/worker_$r.json" "$r" <<'PY' || fail "worker $r's result"
import json, sys
j = json.load(open(sys.argv[1]))
m = j.get("membership", [])
print("worker", sys.argv[2], "membership", m, "samples_trained", j.get("samples_trained"),
      "param_l2", j["param_l2"])
assert [c["present"] for c in m] == [[0, 1], [0, 1, 2], [0, 1]], m
t1, t2 = m[1]["from_iteration"], m[2]["from_iteration"]
assert j["samples_trained"] == 8 * (2 * 1500 + (t2 - t1)) or sys.argv[2] == "2", j
PY
done
# Ranks 0 and 1 take part to the end: they hold the same parameters.
l2_0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["param_l2"])' "$D/worker_0.json")
l2_1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["param_l2"])' "$D/worker_1.json")
[ "$l2_0" = "$l2_1" ] || fail "ranks 0 and 1 end with param_l2 $l2_0 and $l2_1"
if [ "$failures" -ne 0 ]; then
  for f in "$D"/*.log; do echo "== $f"; tail -5 "$f"; done
  echo "$failures failure(s)"; exit 1
fi
echo "PASS"
