#!/usr/bin/env bash
# launch_cluster --elastic_control (docs/reliability.md, "Elastic membership"): a run of
# real processes that goes 2 -> 3 -> 2 workers through the control file (`add`, then
# `remove 2`) ends ok, with the membership recorded in summary.json and rank 2's result.
set -uo pipefail

TMP="${TEST_TMPDIR:-$(mktemp -d)}"
OUT="$TMP/elastic_launch"
CONTROL="$TMP/control"
: > "$CONTROL"
cat > "$TMP/c.textproto" <<CFG
name: "elastic_launch"
mode: "p3"
output_dir: "$OUT"
cluster { workers: 2 servers: 2 peer_timeout_s: 60 elastic { max_workers: 3 } }
model { name: "small_cnn" }
data { dataset: "synthetic" synthetic_size: 512 }
training { batch_size: 8 iterations: 1500 log_every: 5 evaluate: false }
scheduling { slice_params: 20000 }
CFG
fail() { echo "FAIL: $*"; for f in "$OUT"/logs/*.log "$TMP/launcher.log"; do echo "== $f"; tail -4 "$f"; done; exit 1; }
wait_for() {  # $1 = file, $2 = pattern, $3 = seconds
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "no '$2' in $1 within $3 s"
}

tools/launch_cluster --config="$TMP/c.textproto" --server_binary=server/p3_server \
  --worker_binary=worker/p3_worker --plot=false --elastic_control="$CONTROL" \
  > "$TMP/launcher.log" 2>&1 &
launcher=$!
trap 'kill -TERM $launcher 2>/dev/null' EXIT
wait_for "$OUT/logs/worker_0.log" 'PROGRESS iteration=20 ' 120
echo add >> "$CONTROL"
wait_for "$OUT/logs/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1, 2' 120
wait_for "$OUT/logs/worker_2.log" 'PROGRESS' 120
echo "remove 2" >> "$CONTROL"
wait_for "$OUT/logs/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1$' 120
wait "$launcher"; rc=$?
[ "$rc" -eq 0 ] || fail "launch_cluster exited $rc"
grep "elastic control" "$TMP/launcher.log"
python3 - "$OUT/summary.json" "$OUT/results/worker_2.json" <<'PY' || fail "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
print("status", s["status"], "elastic", s.get("elastic"), "samples_trained",
      s.get("samples_trained"), "param_l2", s["param_l2"])
assert s["status"] == "ok", s["status"]
m = s["elastic"]["membership"]
assert s["elastic"]["max_workers"] == 3
assert [c["present"] for c in m] == [[0, 1], [0, 1, 2], [0, 1]], m
assert s["samples_trained"] == 8 * (2 * 1500 + m[2]["from_iteration"] - m[1]["from_iteration"])
assert json.load(open(sys.argv[2]))["membership"] == m
PY
echo PASS
