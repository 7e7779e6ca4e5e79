#!/usr/bin/env bash
# The trainer outside the repository (worker/examples/custom_trainer/, a Bazel workspace of
# its own that pulls p3 in by local_repository) builds with its own `bazel build`, trains
# its own model on Fashion-MNIST with two workers against one p3_server, reaches a sane
# test accuracy, and writes a state dict PyTorch reads (when python3-torch is there). The
# same program launched by launch_cluster through worker.command (its flags from the P3_*
# environment) trains as well.
#
# Runs Bazel inside the test: tagged "local" (no sandbox; it reads the source tree through
# this script's own symlink). The nested build keeps its output under
# ~/.cache/p3-custom-trainer-bazel, so only the first run builds p3's libraries again.
set -uo pipefail

source tests/testing/cases.sh
source tests/testing/skip.sh

SERVER="$PWD/server/p3_server"
LAUNCHER="$PWD/tools/launch_cluster"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
PY=/usr/bin/python3
DATA=/usr/share/datasets/fashion-mnist
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT

if ! command -v bazel >/dev/null; then
  p3_skip "custom trainer" "no bazel on PATH"
  exit 0
fi
if [[ ! -e "$DATA/train-images-idx3-ubyte.gz" ]]; then
  p3_skip "custom trainer" "no Fashion-MNIST in $DATA (dataset-fashion-mnist)"
  exit 0
fi

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
workspace="$repo/worker/examples/custom_trainer"
home=$(getent passwd "$(id -u)" | cut -d: -f6)
cache="${home:-/tmp}/.cache"

# --- it builds in its own workspace ----------------------------------------------------
case_name=build
output="$TMP/build.out"
# The test's environment is not the nested Bazel's business.
run_bazel() {
  (cd "$workspace" && env -u TEST_TMPDIR -u RUNFILES_DIR -u TEST_SRCDIR -u JAVA_RUNFILES \
      HOME="${home:-$TMP}" \
      bazel --output_user_root="$cache/p3-custom-trainer-bazel" --max_idle_secs=60 "$@")
}
if ! run_bazel build --disk_cache="$cache/p3-bazel-disk" //:custom_trainer >"$output" 2>&1; then
  fail "bazel build //:custom_trainer failed in $workspace"
  finish_cases
fi
trainer="$workspace/bazel-bin/custom_trainer"
cp "$trainer" "$TMP/custom_trainer"   # the nested bazel-bin moves on the next build
run_bazel shutdown >/dev/null 2>&1
ok

# --- it trains against a p3_server -----------------------------------------------------------
case_name=train
output="$TMP/train.out"
cat >"$TMP/server.textproto" <<CFG
name: "custom_trainer"
mode: "p3"
cluster { workers: 2 servers: 1 peer_timeout_s: 60 }
optimizer { name: "sgd" lr: 0.05 }
CFG
"$SERVER" --config="$TMP/server.textproto" --server_index=0 --port_file="$TMP/s0.port" \
  >"$TMP/server.log" 2>&1 &
pids+=($!)
server_pid=$!
for _ in $(seq 100); do [[ -s "$TMP/s0.port" ]] && break; sleep 0.1; done
if [[ ! -s "$TMP/s0.port" ]]; then
  output="$TMP/server.log"
  fail "p3_server did not start"
  finish_cases
fi
address="127.0.0.1:$(cat "$TMP/s0.port")"
for rank in 0 1; do
  "$TMP/custom_trainer" --rank=$rank --num_workers=2 --servers="$address" --iterations=150 \
    --model_file="$TMP/model.pt" >"$TMP/worker_$rank.log" 2>&1 &
  pids+=($!)
  eval "worker_pid_$rank=$!"
done
wait "$worker_pid_0"; rc0=$?
wait "$worker_pid_1"; rc1=$?
wait "$server_pid"; rcs=$?
output="$TMP/worker_0.log"
accuracy=$(sed -n 's/^test_accuracy //p' "$TMP/worker_0.log")
if [[ $rc0 -ne 0 || $rc1 -ne 0 || $rcs -ne 0 ]]; then
  fail "exit statuses: worker 0 $rc0, worker 1 $rc1, server $rcs"
  sed 's/^/    | /' "$TMP/worker_1.log" "$TMP/server.log"
elif ! "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.7 else 1)" "${accuracy:-0}"; then
  fail "test accuracy ${accuracy:-none} after 150 iterations, expected > 0.7"
elif [[ ! -s "$TMP/model.pt" ]]; then
  fail "rank 0 wrote no model file"
else
  echo "test accuracy $accuracy"
  ok
fi

# --- launch_cluster runs it: worker.command, the P3_* environment for its flags ------------
case_name=launched
output="$TMP/launched.out"
cat >"$TMP/launched.textproto" <<CFG
name: "custom_trainer_launched"
mode: "p3"
cluster { workers: 2 servers: 1 peer_timeout_s: 60 }
optimizer { name: "sgd" lr: 0.05 }
output_dir: "$TMP/launched"
worker { command: "'$TMP/custom_trainer' --iterations=150" }
CFG
"$LAUNCHER" --config="$TMP/launched.textproto" --server_binary="$SERVER" --plot=false \
  >"$output" 2>&1
rc=$?
accuracy=$(sed -n 's/^test_accuracy //p' "$TMP/launched/logs/worker_0.log" 2>/dev/null)
if [[ $rc -ne 0 ]]; then
  fail "launch_cluster exited with status $rc"
elif ! "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.7 else 1)" "${accuracy:-0}"; then
  fail "test accuracy ${accuracy:-none} after 150 iterations, expected > 0.7"
elif [[ ! -s "$TMP/launched/model.pt" ]]; then
  fail "rank 0 wrote no model to <P3_RUN_DIR>/model.pt"
elif ! json_check "$TMP/launched/summary.json" 's["status"] == "ok" and s["worker_program"]["results_missing"] == ["worker_0", "worker_1"]'; then
  fail "summary.json does not say that custom_trainer writes no result file"
else
  echo "test accuracy $accuracy (launched)"
  ok
fi

# --- PyTorch reads what it wrote -------------------------------------------------------------
case_name=torch_load
output="$TMP/torch_load.out"
if ! "$PY" -c 'import torch' 2>/dev/null; then
  p3_skip "torch_load" "$PY cannot import torch"
elif ! "$PY" - "$TMP/model.pt" >"$output" 2>&1 <<'PY'
import sys
import torch
state = torch.load(sys.argv[1])
expected = {"conv1.weight": (16, 1, 3, 3), "bn1.running_mean": (16,), "fc.weight": (10, 1568)}
for name, shape in expected.items():
    assert tuple(state[name].shape) == shape, (name, tuple(state[name].shape))
assert state["bn1.num_batches_tracked"].dtype == torch.int64
assert state["bn1.num_batches_tracked"].item() == 150, state["bn1.num_batches_tracked"]
print(len(state), "entries")
PY
then
  fail "torch.load did not read the expected state dict"
else
  ok
fi

finish_cases
