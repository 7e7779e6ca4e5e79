#!/usr/bin/env bash
# Models in and out of PyTorch, checked by Debian's python3-torch and python3-torchvision:
# the model.pt a run writes loads into torchvision's model (strict) and gives p3's output;
# torchvision's state dict round-trips through p3 unchanged; model.init_from starts a
# run from it and refuses a mismatch by name; the zoo's other torchvision models have
# torchvision's state-dict entries; a cluster run names its model file in summary.json.
# Skipped (P3_SKIPPED) where /usr/bin/python3 cannot import torch and torchvision.
set -uo pipefail

source tests/testing/cases.sh
source tests/testing/skip.sh

PY=/usr/bin/python3
HELPER=tests/models/pytorch_interop.py
TOOL=tests/models/state_dict_tool
WORKER=worker/p3_worker
TMP="${TEST_TMPDIR:-$(mktemp -d)}"

if ! "$PY" -c 'import torch, torchvision' 2>/dev/null; then
  p3_skip "PyTorch interop cases" "$PY cannot import torch and torchvision"
  exit 0
fi

# write_config FILE [MODEL_FIELDS [OPTIMIZER_FIELDS]]: a local-mode ResNet-50 run of 3
# iterations on 32x32 synthetic images (a small learning rate: eval-mode outputs stay
# moderate after so few BatchNorm updates).
write_config() {
  cat >"$1" <<CFG
name: "interop"
mode: "local"
model { name: "resnet50" image_size: 32 in_channels: 3 ${2:-} }
data { dataset: "synthetic" synthetic_size: 64 }
training { batch_size: 4 iterations: 3 evaluate: false log_every: 100 }
optimizer { name: "sgd" ${3:-lr: 0.001} }
output_dir: "$TMP/run_${case_name}"
CFG
}

"$PY" "$HELPER" input "$TMP/input.pt" || { echo "cannot write the input"; exit 1; }

# --- a trained model (BatchNorm buffers included) in torchvision gives p3's output -------
case_name=export
output="$TMP/$case_name.out"
write_config "$TMP/export.textproto"
if ! "$WORKER" --config="$TMP/export.textproto" --result_file="$TMP/export.json" >"$output" 2>&1; then
  fail "p3_worker failed"
elif ! json_check "$TMP/export.json" 's["model_file"] == sys.argv[3]' "$TMP/run_export/model.pt"; then
  fail "the result does not name model_file"
elif ! "$TOOL" --model=resnet50 --image_size=32 --init_from="$TMP/run_export/model.pt" \
    --input="$TMP/input.pt" --output="$TMP/export_out.pt" >"$output" 2>&1; then
  fail "p3's forward pass failed"
elif ! "$PY" "$HELPER" compare_output "$TMP/run_export/model.pt" "$TMP/input.pt" \
    "$TMP/export_out.pt" >"$output" 2>&1; then
  fail "torchvision's output is not p3's"
else
  cat "$output"
  ok
fi

# --- torchvision -> p3 -> torchvision is exact ---------------------------------------------
case_name=round_trip
output="$TMP/$case_name.out"
if ! "$PY" "$HELPER" torchvision_init "$TMP/tv.pt" 5 >"$output" 2>&1; then
  fail "torch.save failed"
elif ! "$TOOL" --model=resnet50 --init_from="$TMP/tv.pt" --save="$TMP/back.pt" >"$output" 2>&1; then
  fail "p3 did not load torchvision's state dict"
elif ! "$PY" "$HELPER" same_state "$TMP/tv.pt" "$TMP/back.pt" >"$output" 2>&1; then
  fail "the state dict changed on the way"
else
  ok
fi

# --- model.init_from: a run starts from the file --------------------------------------------
# lr 1e-9 without momentum or decay: the parameters stay the file's (within 1e-6), the
# BatchNorm statistics move.
case_name=init_from
output="$TMP/$case_name.out"
write_config "$TMP/init.textproto" "init_from: \"$TMP/tv.pt\"" "lr: 1e-9 momentum: 0 weight_decay: 0"
if ! "$WORKER" --config="$TMP/init.textproto" >"$output" 2>&1; then
  fail "p3_worker failed"
elif ! "$PY" "$HELPER" same_state "$TMP/tv.pt" "$TMP/run_init_from/model.pt" 1e-6 params >"$output" 2>&1; then
  fail "the run did not start from the file"
elif ! "$PY" "$HELPER" different_state "$TMP/tv.pt" "$TMP/run_export/model.pt" >"$output" 2>&1; then
  fail "p3's own initialisation equals the file's"
else
  ok
fi

# --- model.init_from: a mismatch is refused, naming it -------------------------------------
case_name=init_from_mismatch
output="$TMP/$case_name.out"
write_config "$TMP/mismatch.textproto" "num_classes: 5 init_from: \"$TMP/tv.pt\""
if "$WORKER" --config="$TMP/mismatch.textproto" >"$output" 2>&1; then
  fail "p3_worker accepted a 10-class file for a 5-class model"
elif ! grep -qF 'model.init_from: '"$TMP"'/tv.pt: "fc.weight": shape [10, 2048] in the file, [5, 2048] in the model' "$output"; then
  fail "the error does not name the mismatch"
else
  ok
fi

# --- the zoo's torchvision models have torchvision's entries -------------------------------
for model in vgg16 vgg19 inception_v3; do
  case_name="names_$model"
  output="$TMP/$case_name.out"
  if ! "$TOOL" --model=$model --list >"$TMP/$model.tsv" 2>"$output"; then
    fail "state_dict_tool --list failed"
  elif ! "$PY" "$HELPER" names $model "$TMP/$model.tsv" >"$output" 2>&1; then
    fail "names, shapes or dtypes differ from torchvision's"
  else
    ok
  fi
done

# --- a cluster run: rank 0 writes the model, summary.json names it -------------------------
case_name=cluster
output="$TMP/$case_name.out"
cat >"$TMP/cluster.textproto" <<CFG
name: "interop_cluster"
mode: "p3"
cluster { workers: 2 servers: 1 }
model { name: "small_cnn" }
data { dataset: "synthetic" synthetic_size: 256 }
training { batch_size: 8 iterations: 4 evaluate: false }
output_dir: "$TMP/cluster"
CFG
if ! tools/launch_cluster --server_binary=server/p3_server --worker_binary="$WORKER" \
    --config="$TMP/cluster.textproto" >"$output" 2>&1; then
  fail "the cluster run failed"
elif ! json_check "$TMP/cluster/summary.json" 's["model_file"] == sys.argv[3]' "$TMP/cluster/model.pt"; then
  fail "summary.json does not name model_file"
elif ! "$TOOL" --model=small_cnn --list >"$TMP/small_cnn.tsv" 2>"$output" ||
     ! "$PY" "$HELPER" listing_matches "$TMP/cluster/model.pt" "$TMP/small_cnn.tsv" >"$output" 2>&1; then
  fail "model.pt is not small_cnn's state dict"
else
  ok
fi

finish_cases
