#!/usr/bin/env bash
# Every shipped config predicted out of the box (issue 36, item 6): //tools:p3_sim on each
# config of configs/ and configs/bench/ with no --profile and no other file, as a new user
# runs it. A cluster config must give a prediction from the model's committed profile
# (configs/sim/profiles, in p3_sim's runfiles); a pipeline config must be refused with
# exactly the simulator's message for it. Then every zoo model through the default config,
# a batch with no profile of its own (the nearest one, scaled), and a folder with no
# profile (refused by name). Runs from the runfiles tree (bazel test), where the paths
# below are relative; each run is a few simulated iterations (well under a second).
set -uo pipefail

source tests/testing/cases.sh

SIM=tools/p3_sim
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
PIPELINE_MESSAGE='p3_sim: mode "pipeline" cannot be simulated: it is a pipeline of stages (tools/pipeline_train, docs/pipeline.md), not a cluster of workers and parameter servers; p3_sim predicts the cluster modes (p3, baseline, ..., local) and ring all-reduce'
ZOO="small_cnn mlp resnet50 vgg16 vgg19 inception_v3 seq2seq_lstm transformer row_lstm"

# The config's value of a top-level field ("mode") or of a field inside the block named.
field() {  # field FILE FIELD [BLOCK]
  /usr/bin/python3 - "$@" <<'PY'
import re, sys
text = re.sub(r"#.*", "", open(sys.argv[1]).read())
if len(sys.argv) > 3:
    m = re.search(sys.argv[3] + r"\s*\{([^}]*)\}", text)
    text = m.group(1) if m else ""
    m = re.search(r"\b" + sys.argv[2] + r'\s*:\s*"?([^"\s]+)', text)
else:
    m = re.search(r"^" + sys.argv[2] + r'\s*:\s*"?([^"\s]+)', text, re.M)
print(m.group(1) if m else "")
PY
}

configs=(configs/*.textproto configs/bench/*.textproto)
case_name="the configs are there: at least 15"
output=""
if [[ ${#configs[@]} -lt 15 ]]; then fail "only ${#configs[@]}: ${configs[*]}"; else ok; fi

for config in "${configs[@]}"; do
  case_name="$config"
  output="$TMP/$(basename "$config").out"
  json="$TMP/$(basename "$config").json"
  rm -f "$json"
  "$SIM" --config="$config" --iterations=4 --warmup=1 --out="$json" >"$output" 2>&1
  rc=$?
  mode=$(field "$config" mode)
  model=$(field "$config" name model)
  if [[ "$mode" == pipeline ]]; then
    if [[ $rc -ne 2 ]]; then
      fail "exit status $rc, expected 2 for a pipeline config"
    elif [[ "$(cat "$output")" != "$PIPELINE_MESSAGE" ]]; then
      fail "not exactly the pipeline message"
    else
      ok
    fi
  elif [[ $rc -ne 0 ]]; then
    fail "exit status $rc"
  elif ! grep -q "^profile: .*configs/sim/profiles/${model}_b[0-9]*\(_i[0-9]*\)\?_cpu.json " "$output"; then
    fail "no committed profile of $model named"
  elif ! json_check "$json" 's["samples_per_second"] > 0 and s["model"] == sys.argv[3]' "$model"; then
    fail "samples_per_second or model (expected $model) in $json"
  else
    ok
  fi
done

for model in $ZOO; do
  case_name="zoo model $model through configs/default.textproto"
  output="$TMP/zoo_$model.out"
  json="$TMP/zoo_$model.json"
  "$SIM" --config=configs/default.textproto --set=model.name="$model" --iterations=4 \
    --warmup=1 --out="$json" >"$output" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "exit status $rc"
  elif ! json_check "$json" 's["samples_per_second"] > 0 and s["model"] == sys.argv[3] and s["batch_per_worker"] == 32' "$model"; then
    fail "samples_per_second, model or batch in $json"
  else
    ok
  fi
done

case_name="a batch with no profile of its own: the nearest, scaled linearly"
output="$TMP/batch16.out"
"$SIM" --config=configs/default.textproto --set=training.batch_size=16 --iterations=4 \
  --warmup=1 --out="$TMP/batch16.json" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q "^profile: .*small_cnn_b32_cpu.json (batch 32, times scaled linearly to batch 16)$" "$output"; then
  fail "the profile line does not say the scaling"
elif ! json_check "$TMP/batch16.json" 's["batch_per_worker"] == 16'; then
  fail "batch_per_worker"
else
  ok
fi

case_name="a folder with no profile of the model: refused, naming the model"
output="$TMP/empty.out"
mkdir -p "$TMP/no_profiles"
"$SIM" --config=configs/default.textproto --profile_dir="$TMP/no_profiles" >"$output" 2>&1
rc=$?
if [[ $rc -ne 2 ]]; then
  fail "exit status $rc, expected 2"
elif ! grep -q "^p3_sim: no profile of model \"small_cnn\" in $TMP/no_profiles " "$output"; then
  fail "the message does not name the model and the folder"
else
  ok
fi

finish_cases
