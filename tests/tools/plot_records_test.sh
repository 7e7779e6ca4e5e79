#!/usr/bin/env bash
# tools/plot_records.py (the launcher's curves.png): a records file with the per-epoch
# columns of worker/trainer.h, one without them (an older worker or a custom trainer),
# and an unreadable one. Runs from the runfiles tree (bazel test).
set -uo pipefail

source tests/testing/cases.sh
source tests/testing/skip.sh

PLOT=tools/plot_records.py
PY=/usr/bin/python3
TMP="${TEST_TMPDIR:-$(mktemp -d)}"

is_png() { [[ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]]; }

# A run of 3 epochs of 4 iterations, as the trainer writes it.
with_epochs="$TMP/with_epochs"
mkdir -p "$with_epochs/records"
{
  echo "iteration,loss,iteration_seconds,samples_per_second,epoch,epoch_loss,test_accuracy"
  for i in $(seq 0 11); do
    e=$((i / 4 + 1))
    if (((i + 1) % 4 == 0)); then
      echo "$i,$((30 - i)).5,0.1,640,$e,$((31 - i)).0,0.$((6 + e))5"
    else
      echo "$i,$((30 - i)).5,0.1,640,$e,,"
    fi
  done
} >"$with_epochs/records/worker_0.csv"

old_format="$TMP/old_format"
mkdir -p "$old_format/records"
printf 'iteration,loss,iteration_seconds,samples_per_second\n0,2.3,0.1,640\n1,2.1,0.1,640\n' \
  >"$old_format/records/worker_0.csv"

if ! "$PY" -c 'import matplotlib' 2>/dev/null; then
  case_name=no_matplotlib
  output="$TMP/no_matplotlib.out"
  "$PY" "$PLOT" "$with_epochs" >"$output" 2>&1
  rc=$?
  if [[ $rc -ne 3 ]] || ! grep -q 'python3-matplotlib is not installed' "$output"; then
    fail "exit status $rc, expected 3 with the package named"
  else
    ok
  fi
  p3_skip "drawing cases" "matplotlib is not installed"
  finish_cases
fi

case_name=with_epochs
output="$TMP/with_epochs.out"
"$PY" "$PLOT" "$with_epochs" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! is_png "$with_epochs/curves.png"; then
  fail "no curves.png"
elif [[ -e "$with_epochs/curves.png.tmp.png" ]]; then
  fail "the temporary file was left behind"
else
  ok
fi

case_name=old_format
output="$TMP/old_format.out"
"$PY" "$PLOT" "$old_format" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]] || ! is_png "$old_format/curves.png"; then
  fail "exit status $rc; a records file without epochs must still give the loss curve"
else
  ok
fi

case_name=unreadable
output="$TMP/unreadable.out"
"$PY" "$PLOT" "$TMP/nothing_here" >"$output" 2>&1
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q "cannot read $TMP/nothing_here/records/worker_0.csv" "$output"; then
  fail "exit status $rc, expected 2 naming the file"
elif [[ -e "$TMP/nothing_here/curves.png" ]]; then
  fail "a picture was drawn without records"
else
  ok
fi

finish_cases
