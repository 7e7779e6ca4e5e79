#!/usr/bin/env bash
# launch_cluster --elastic_control (docs/reliability.md, "Elastic membership"): a run of
# real processes that goes 2 -> 3 -> 2 workers through the control file (`add`, then
# `remove 2`) ends ok, with the membership recorded in summary.json and rank 2's result,
# and rank 2's row of the end-of-run table shows its own iterations. Then mode local
# replays that membership (--membership_from=summary.json) and ends with the cluster's
# param_l2 within REPLAY_TOLERANCE (relative), while local with 2 workers throughout (the
# same sample stream, no third worker) differs: on the whole parameter vector where
# /usr/bin/python3 has torch (elastic_parameters_check.py), else on param_l2.
set -uo pipefail
source tests/testing/skip.sh
CHECK=tests/cluster/elastic_parameters_check.py  # the parameter vectors against local
# The tanh MLP, not the small CNN: P3 and `local` round differently (per-worker sums
# against one batch), and the small CNN's training amplifies that where oneDNN runs its
# AVX2 kernels (a CPU without AVX-512, or DNNL_MAX_CPU_ISA=AVX2): 7.5e-8 apart on the
# whole vector at iteration 40, 7.1e-5 by iteration 96, past the tolerance and near the
# control. The MLP stays at 1e-7 with either kernel set (docs/reliability.md, 2026-12-07).
ITERATIONS=4000

TMP="${TEST_TMPDIR:-$(mktemp -d)}"
OUT="$TMP/elastic_launch"
CONTROL="$TMP/control"
: > "$CONTROL"
cat > "$TMP/c.textproto" <<CFG
name: "elastic_launch"
mode: "p3"
output_dir: "$OUT"
cluster { workers: 2 servers: 2 peer_timeout_s: 60 elastic { max_workers: 3 } }
model { name: "mlp" image_size: 28 }
data { dataset: "synthetic" synthetic_size: 512 }
training { batch_size: 8 iterations: $ITERATIONS log_every: 5 evaluate: false }
optimizer { lr: 0.01 }
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
# Rank 2 trains about 30 iterations (6 PROGRESS lines, one per 5) before it is removed, so
# that the data of 2 workers throughout differs enough from the replay's (below).
for _ in $(seq 1200); do
  n=$(grep -c PROGRESS "$OUT/logs/worker_2.log" 2>/dev/null); [ "${n:-0}" -ge 6 ] && break
  sleep 0.1
done
wait_for "$OUT/logs/worker_2.log" 'PROGRESS' 1
echo "remove 2" >> "$CONTROL"
wait_for "$OUT/logs/worker_0.log" 'MEMBERSHIP from_iteration=[0-9]* present=0, 1$' 120
wait "$launcher"; rc=$?
echo "elastic run done after ${SECONDS} s"
[ "$rc" -eq 0 ] || fail "launch_cluster exited $rc"
grep "elastic control" "$TMP/launcher.log"
python3 - "$OUT/summary.json" "$OUT/results/worker_2.json" "$ITERATIONS" <<'PY' || fail "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
print("status", s["status"], "elastic", s.get("elastic"), "samples_trained",
      s.get("samples_trained"), "param_l2", s["param_l2"])
assert s["status"] == "ok", s["status"]
m = s["elastic"]["membership"]
assert s["elastic"]["max_workers"] == 3
assert [c["present"] for c in m] == [[0, 1], [0, 1, 2], [0, 1]], m
span = m[2]["from_iteration"] - m[1]["from_iteration"]
assert s["samples_trained"] == 8 * (2 * int(sys.argv[3]) + span)
assert json.load(open(sys.argv[2]))["membership"] == m
PY
# The table: rank 2's iterations are its own (the 3-worker span), not the run's.
python3 - "$OUT/summary.json" "$TMP/launcher.log" <<'PY' || fail "end-of-run table"
import json, re, sys
m = json.load(open(sys.argv[1]))["elastic"]["membership"]
own = m[2]["from_iteration"] - m[1]["from_iteration"]
rows = [l.split() for l in open(sys.argv[2]) if re.match(r"\s*worker_2\s", l)]
print("worker_2 row", rows, "own iterations", own)
assert rows and rows[-1][5] == str(own), rows
PY

# Mode local fed the same membership, and fed none (2 workers throughout), side by side.
for run in replay two; do
  flag=(); [ "$run" = replay ] && flag=(--membership_from="$OUT/summary.json")
  tools/launch_cluster --config="$TMP/c.textproto" --set=mode=local --plot=false \
    --worker_binary=worker/p3_worker --set=output_dir="$TMP/$run" "${flag[@]}" \
    > "$TMP/$run.log" 2>&1 &
  eval "local_$run=$!"
done
for run in replay two; do
  eval "wait \$local_$run" || { tail -20 "$TMP/$run.log"; fail "local ($run) failed"; }
done
echo "local runs done after ${SECONDS} s"
# The final parameters: param_l2 (relative), and where python3 can read the state dicts
# the relative L2 distance of the whole parameter vector. A replay within the tolerance; 2
# workers throughout (its sample stream shifted after the 3-worker span) beyond it.
# The control (2 workers throughout) is told apart on the whole parameter vector where
# /usr/bin/python3 has torch: param_l2 is one norm, and two different vectors can share
# it to 3e-8 (it happened, in a full parallel bazel test). Without torch, on param_l2.
torch=0; /usr/bin/python3 -c 'import torch' 2>/dev/null && torch=1
python3 - "$OUT/summary.json" "$TMP/replay/summary.json" "$TMP/two/summary.json" \
  "$ITERATIONS" "$torch" <<'PY' || fail "local against the elastic run (param_l2)"
import json, sys
elastic, replay, two = (json.load(open(f)) for f in sys.argv[1:4])
tol = 5e-8
assert replay["elastic"]["membership"] == elastic["elastic"]["membership"], replay.get("elastic")
assert replay["samples_trained"] == elastic["samples_trained"]
assert two["samples_trained"] == 8 * 2 * int(sys.argv[4])
p = elastic["param_l2"]
err, err_two = (abs(r["param_l2"] - p) / p for r in (replay, two))
print("param_l2: elastic %.9f, local replay %.9f (relative error %.3g), local 2 workers %.9f "
      "(%.3g); tolerance %g" % (p, replay["param_l2"], err, two["param_l2"], err_two, tol))
assert err <= tol and (sys.argv[5] == "1" or err_two > tol), (err, err_two)
PY
if [ "$torch" = 1 ]; then
  /usr/bin/python3 "$CHECK" "$OUT/model.pt" "$TMP/replay/model.pt" "$TMP/two/model.pt" ||
    fail "local against the elastic run (parameters)"
else
  p3_skip "parameters against local" "/usr/bin/python3 cannot import torch (param_l2 compared)"
fi
echo PASS
