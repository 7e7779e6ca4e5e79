#!/usr/bin/env bash
# Smoke test of //tools:grpc_api_probe (docs/results/streaming/streaming.md, "gRPC's two
# APIs on P3's pattern") on loopback: every API and mix of ends moves every message there
# and back, the CSV gets a row per run with the figures, iperf3's rate, its CPU per GB and the
# ratios go into the rows with --iperf3_seconds (skipped without iperf3), and a bad --apis is
# refused.
# Asserts no timing. Runs from the runfiles tree (bazel test).
set -uo pipefail

source tests/testing/cases.sh
source tests/testing/skip.sh

PROBE=tools/grpc_api_probe
PY=/usr/bin/python3
TMP="${TEST_TMPDIR:-$(mktemp -d)}"

case_name="loopback: sync, callback and the mixes, 2 rounds, every message back"
output="$TMP/probe.out"
"$PROBE" --runs=2 --megabytes=16 --iteration_megabytes=4 --message_bytes=160000 \
  --apis=sync,callback,callback/sync,sync/callback --csv="$TMP/probe.csv" \
  --out_dir="$TMP/probe" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! "$PY" - "$TMP/probe.csv" >>"$output" 2>&1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 8, rows
# Each API in each round; the first API of a round alternates.
assert sorted(r["api"] for r in rows) == sorted(2 * ["sync", "callback", "callback/sync",
                                                      "sync/callback"]), rows
assert rows[0]["api"] == "sync" and rows[4]["api"] == "callback", rows
for r in rows:
    # 16 MB of 160 kB messages, 4 MB an iteration: 100 messages, 25 an iteration.
    assert r["messages"] == "100" and r["iteration_messages"] == "25", r
    assert float(r["goodput_gbps"]) > 0 and float(r["cpu_s_per_gb"]) > 0, r
    assert float(r["client_cpu_s"]) > 0 and float(r["server_cpu_s"]) >= 0, r
    assert r["rate_gbps"] == "0" and r["grpc_experiments"] != "", r
PY
then
  fail "unexpected CSV"
elif ! grep -q '^| sync | ' "$output" || ! grep -q '^| callback/sync | ' "$output" ||
  ! grep -q '^medians of 2 runs each, loopback' "$output"; then
  fail "no table of medians"
else
  ok
fi

case_name="--iperf3_seconds: iperf3 first on the same link; its rate, CPU per GB, ratios in rows"
output="$TMP/iperf3.out"
if ! command -v iperf3 >/dev/null; then
  p3_skip "$case_name" "no iperf3 on PATH"
else
  "$PROBE" --runs=1 --megabytes=16 --iteration_megabytes=4 --apis=sync --iperf3_seconds=1 \
    --csv="$TMP/iperf3.csv" --out_dir="$TMP/iperf3" >"$output" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "exit status $rc"
  elif ! "$PY" - "$TMP/iperf3.csv" >>"$output" 2>&1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 1, rows
r = rows[0]
assert float(r["iperf3_gbps"]) > 0, r
assert abs(float(r["ratio"]) - float(r["goodput_gbps"]) / float(r["iperf3_gbps"])) < 1e-6, r
assert float(r["iperf3_host_cpu_s_per_gb"]) > 0, r
# The cells carry 6 significant digits.
want = float(r["host_cpu_s_per_gb"]) / float(r["iperf3_host_cpu_s_per_gb"])
assert abs(float(r["cpu_ratio_to_iperf3"]) / want - 1) < 1e-4, r
PY
  then
    fail "no iperf3 figures in the row"
  elif ! grep -q '^| API | goodput Gbit/s | goodput ÷ iperf3 |' "$output"; then
    fail "no ÷ iperf3 column in the table"
  else
    ok
  fi
fi

case_name="an unknown API is refused, naming it"
output="$TMP/bad.out"
"$PROBE" --runs=1 --megabytes=1 --apis=sync,async --out_dir="$TMP/bad" >"$output" 2>&1
rc=$?
if [[ $rc -eq 0 ]]; then
  fail "exit status 0"
elif ! grep -q 'unknown API "async"' "$output"; then
  fail "the error does not name the API"
else
  ok
fi

finish_cases
