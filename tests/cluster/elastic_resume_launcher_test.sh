#!/usr/bin/env bash
# Elastic runs with checkpoints through launch_cluster (docs/reliability.md, "Elastic
# membership"), checked against local --membership_from within the tolerances of
# elastic_launcher_test, while local with 2 workers throughout (the control) is beyond them.
# 1. Resumed by hand: 2 workers with checkpoints every 10 iterations, a third added
#    (`add`), the launcher stopped (SIGTERM) once both servers hold a checkpoint N taken
#    with 3 workers present. The same config with checkpoint.resume starts exactly ranks
#    0, 1 and 2 (the present set of N, read from the checkpoint); rank 0 removes rank 2 on
#    `remove 2` (so it knows rank 2 is present); the run ends ok with the whole
#    2 -> 3 -> 2 membership in summary.json.
# 2. Under --max_restarts=1: 2 -> 3 -> 2 by `add` and `remove 2`, then server 1 is killed
#    (SIGKILL) once a checkpoint after the removal exists; the launcher restarts every
#    process from it with ranks 0 and 1 only (rank 2 had left: gone, not a failure), and
#    the run ends ok.
set -uo pipefail
source tests/testing/skip.sh
CHECK=tests/cluster/elastic_parameters_check.py  # the parameter vectors against local
# The tanh MLP, as in elastic_launcher_test (why there). Long enough that `remove 2` lands
# well before the resumed run ends: 6000 iterations of it take about 12 s here.
ITERATIONS=6000

TMP="${TEST_TMPDIR:-$(mktemp -d)}"
OUT="$TMP/first"
RESUMED="$TMP/resumed"
CKPT="$TMP/ckpt"
CONTROL="$TMP/control"
: > "$CONTROL"
cat > "$TMP/c.textproto" <<CFG
name: "elastic_resume"
mode: "p3"
output_dir: "$OUT"
cluster { workers: 2 servers: 2 peer_timeout_s: 60 elastic { max_workers: 3 } }
model { name: "mlp" image_size: 28 }
data { dataset: "synthetic" synthetic_size: 512 }
training { batch_size: 8 iterations: $ITERATIONS log_every: 5 evaluate: false }
optimizer { lr: 0.01 }
scheduling { slice_params: 20000 }
checkpoint { dir: "$CKPT" every: 10 keep: 4 }
CFG
fail() {
  echo "FAIL: $*"
  for f in "$OUT"/logs/*.log "$RESUMED"/logs/*.log "$TMP"/*.log; do echo "== $f"; tail -4 "$f"; done
  exit 1
}
wait_for() {  # $1 = file, $2 = pattern, $3 = seconds
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "no '$2' in $1 within $3 s"
}
launch() {  # $1 = log, then launch_cluster's extra flags; sets $launcher
  local log=$1; shift
  tools/launch_cluster --config="$TMP/c.textproto" --server_binary=server/p3_server \
    --worker_binary=worker/p3_worker --plot=false --elastic_control="$CONTROL" "$@" \
    > "$log" 2>&1 &
  launcher=$!
}
newest_common() {  # the newest checkpoint iteration both servers have
  comm -12 <(ls "$CKPT/server_0" 2>/dev/null | sort) <(ls "$CKPT/server_1" 2>/dev/null | sort) |
    sed -n 's/^ckpt_0*\([0-9][0-9]*\)\.bin$/\1/p' | sort -n | tail -1
}

launch "$TMP/first.log"
trap 'kill -TERM $launcher 2>/dev/null' EXIT
wait_for "$OUT/logs/worker_0.log" 'PROGRESS iteration=20 ' 120
echo add >> "$CONTROL"
wait_for "$OUT/logs/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1, 2' 120
joined=$(sed -n 's/^MEMBERSHIP from_iteration=\([0-9]*\) present=0, 1, 2$/\1/p' \
  "$OUT/logs/worker_0.log")
# Stopped once both servers have a checkpoint 20 or more iterations into the 3-worker span.
for _ in $(seq 1200); do
  n=$(newest_common); [ "${n:-0}" -ge $((joined + 20)) ] && break
  sleep 0.1
done
[ "${n:-0}" -ge $((joined + 20)) ] || fail "no common checkpoint after $((joined + 20))"
kill -TERM "$launcher"; wait "$launcher"
echo "first run stopped after ${SECONDS} s: rank 2 joined at $joined, checkpoint $n"

# Resumed by hand: the same config with checkpoint.resume, a new output folder.
launch "$TMP/resumed.log" --set=checkpoint.resume=true --set=output_dir="$RESUMED"
wait_for "$RESUMED/logs/worker_2.log" 'RESUMED iteration=' 120
wait_for "$TMP/resumed.log" "elastic resume from the checkpoints of iteration [0-9]*: .*0, 1, 2" 1
for _ in $(seq 1200); do
  k=$(grep -c PROGRESS "$RESUMED/logs/worker_2.log" 2>/dev/null); [ "${k:-0}" -ge 3 ] && break
  sleep 0.1
done
echo "remove 2" >> "$CONTROL"
wait_for "$RESUMED/logs/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1$' 120
wait "$launcher"; rc=$?
resumed_at=$(sed -n 's/^RESUMED iteration=\([0-9]*\)$/\1/p' "$RESUMED/logs/worker_0.log")
echo "resumed run (from $resumed_at) done after ${SECONDS} s"
[ "$rc" -eq 0 ] || fail "the resumed launch_cluster exited $rc"
grep "elastic resume\|elastic control" "$TMP/resumed.log"
python3 - "$RESUMED/summary.json" "$ITERATIONS" "$joined" "$resumed_at" <<'PY' || fail "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
iterations, joined, resumed_at = (int(a) for a in sys.argv[2:5])
print("status", s["status"], "elastic", s.get("elastic"), "samples_trained",
      s.get("samples_trained"), "param_l2", s["param_l2"])
assert s["status"] == "ok", s["status"]
m = s["elastic"]["membership"]
assert [c["present"] for c in m] == [[0, 1], [0, 1, 2], [0, 1]], m
assert m[1]["from_iteration"] == joined and joined < resumed_at < m[2]["from_iteration"], m
span = m[2]["from_iteration"] - m[1]["from_iteration"]
assert s["samples_trained"] == 8 * (2 * iterations + span)
PY

# Mode local with 2 workers throughout: the control for both cases.
tools/launch_cluster --config="$TMP/c.textproto" --set=mode=local --plot=false \
  --worker_binary=worker/p3_worker --set=output_dir="$TMP/two" --set=checkpoint.every=0 \
  > "$TMP/two.log" 2>&1 &
local_two=$!
compare_with_local() {  # $1 = the elastic run's output folder, $2 = a name
  tools/launch_cluster --config="$TMP/c.textproto" --set=mode=local --plot=false \
    --worker_binary=worker/p3_worker --set=output_dir="$TMP/replay_$2" \
    --set=checkpoint.every=0 --membership_from="$1/summary.json" > "$TMP/replay_$2.log" 2>&1 ||
    { tail -20 "$TMP/replay_$2.log"; fail "local (replay of $2) failed"; }
  wait "$local_two" 2>/dev/null
  [ -f "$TMP/two/summary.json" ] || { tail -20 "$TMP/two.log"; fail "local (2 workers) failed"; }
  echo "local runs ($2) done after ${SECONDS} s"
  # The control is told apart on the whole parameter vector where /usr/bin/python3 has
  # torch (param_l2 is one norm, which two different vectors can share), else on param_l2.
  local torch=0; /usr/bin/python3 -c 'import torch' 2>/dev/null && torch=1
  python3 - "$1/summary.json" "$TMP/replay_$2/summary.json" "$TMP/two/summary.json" "$2" \
    "$torch" <<'PY' || fail "local against the $2 run (param_l2)"
import json, sys
elastic, replay, two = (json.load(open(f)) for f in sys.argv[1:4])
tol = 5e-8
assert replay["elastic"]["membership"] == elastic["elastic"]["membership"], replay.get("elastic")
assert replay["samples_trained"] == elastic["samples_trained"]
p = elastic["param_l2"]
err, err_two = (abs(r["param_l2"] - p) / p for r in (replay, two))
print("param_l2 (%s): elastic %.9f, local replay %.9f (relative error %.3g), local 2 workers "
      "%.9f (%.3g); tolerance %g" % (sys.argv[4], p, replay["param_l2"], err, two["param_l2"],
                                     err_two, tol))
assert err <= tol and (sys.argv[5] == "1" or err_two > tol), (err, err_two)
PY
  if [ "$torch" = 1 ]; then
    /usr/bin/python3 "$CHECK" "$1/model.pt" "$TMP/replay_$2/model.pt" "$TMP/two/model.pt" "$2" ||
      fail "local against the $2 run (parameters)"
  else
    p3_skip "parameters against local ($2)" "/usr/bin/python3 cannot import torch (param_l2 compared)"
  fi
}
compare_with_local "$RESUMED" resumed

# 2. --max_restarts: server 1 killed after the last change; restarted with ranks 0 and 1.
OUT="$TMP/restarted"
CKPT="$TMP/ckpt_restarted"
launch "$TMP/restarted.log" --max_restarts=1 --set=output_dir="$OUT" --set=checkpoint.dir="$CKPT"
wait_for "$OUT/logs/worker_0.log" 'PROGRESS iteration=20 ' 120
echo add >> "$CONTROL"
wait_for "$OUT/logs/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1, 2' 120
for _ in $(seq 1200); do
  k=$(grep -c PROGRESS "$OUT/logs/worker_2.log" 2>/dev/null); [ "${k:-0}" -ge 3 ] && break
  sleep 0.1
done
echo "remove 2" >> "$CONTROL"
wait_for "$OUT/logs/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1$' 120
left=$(sed -n 's/^MEMBERSHIP from_iteration=\([0-9]*\) present=0, 1$/\1/p' "$OUT/logs/worker_0.log")
for _ in $(seq 1200); do
  n=$(newest_common); [ "${n:-0}" -ge $((left + 10)) ] && break
  sleep 0.1
done
[ "${n:-0}" -ge $((left + 10)) ] || fail "no common checkpoint after $((left + 10))"
pid=$(pgrep -f -- "--server_index=1 --port_file=$OUT/ports/server_1.port")
[ "$(echo "$pid" | wc -w)" -eq 1 ] || fail "server 1 of this run: '$pid'"
kill -KILL "$pid"
wait "$launcher"; rc=$?
echo "restarted run done after ${SECONDS} s (rank 2 left at $left, server 1 killed after $n)"
grep "restarting every process\|elastic control" "$TMP/restarted.log"
[ "$rc" -eq 0 ] || fail "launch_cluster --max_restarts=1 exited $rc"
grep -q "restarting every process from the checkpoints of iteration [0-9]* (restart 1 of 1); the ranks present then: 0, 1$" \
  "$TMP/restarted.log" || fail "no elastic restart in the launcher's log"
[ "$(grep -c RESUMED "$OUT/logs/worker_2.log")" -eq 0 ] || fail "rank 2 (left) was restarted"
grep -q "restarted server 0 ×1, server 1 ×1, worker 0 ×1, worker 1 ×1 (" "$TMP/restarted.log" ||
  fail "the launcher's restart line does not name exactly the restarted processes"
python3 - "$OUT/summary.json" "$ITERATIONS" <<'PY' || fail "summary.json (restarted)"
import json, sys
s = json.load(open(sys.argv[1]))
m = s["elastic"]["membership"]
print("status", s["status"], "membership", m, "samples_trained", s.get("samples_trained"))
assert s["status"] == "ok", s["status"]
assert [c["present"] for c in m] == [[0, 1], [0, 1, 2], [0, 1]], m
span = m[2]["from_iteration"] - m[1]["from_iteration"]
assert s["samples_trained"] == 8 * (2 * int(sys.argv[2]) + span)
PY
compare_with_local "$OUT" restarted
echo PASS
