#!/usr/bin/env bash
# Smoke test of //tools:bench_streaming (docs/results/streaming/streaming.md): a few iterations of
# the real worker library against the real p3_server on loopback (no network emulation,
# no iperf3), checking the exit status and that the bytes reported are exactly those of
# the iterations measured; iperf3 on loopback first (1 s) for its CPU per GB beside ours,
# one way and --bidir (or one way only with --iperf3_bidir=false);
# the shared-memory path with memcpy beside it; bad command lines; bench_streaming.py's
# table from a CSV (older columns and the new ones), its --append (a loopback run added to
# an older CSV; a foreign CSV refused) and its --shared_memory, with the commit each
# binary was built from read from the binary; the heaps in huge pages and --trace_json;
# reads sized to the message (GRPC_EXPERIMENTS) unless told otherwise; --servers (several
# streams on one link) and the threads' context switches.
# Nothing here needs root.
# Runs from the runfiles tree (bazel test), where the paths below are relative.
set -uo pipefail

source tests/testing/cases.sh
source tests/testing/skip.sh

BENCH=tools/bench_streaming
SERVER=server/p3_server
PY=/usr/bin/python3
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
# Asserts a Python expression over the result JSON `r` (the last line of $output).
check_json() {
  "$PY" -c "import json, sys; r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert $1, r" \
    "$output" 2>>"$output.check" || { fail "$1"; return 1; }
}

case_name="loopback: 400,000 parameters, 3 measured iterations, exact byte counts"
output="$TMP/loopback.out"
"$BENCH" --server_binary="$SERVER" --params=400000 --tensors=4 --slice_params=10000 \
  --warmup=1 --iterations=3 --out_dir="$TMP/loopback" --result_json="$TMP/result.json" \
  >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif check_json 'r["network"] == "loopback" and r["params"] == 400000' &&
  check_json 'r["bytes_sent"] == 3 * 400000 * 4 and r["bytes_received"] == 3 * 400000 * 4' &&
  check_json 'r["seconds"] > 0 and r["goodput_up_gbps"] > 0 and r["cpu_s_per_gb"] > 0' &&
  check_json 'r["worker_cpu_s"] > 0 and r["server_cpu_s"] >= 0' &&
  check_json 'r["host_busy_s"] >= r["host_softirq_s"] >= 0 and r["host_cpu_s_per_gb"] >= 0' &&
  check_json 'r["worker_max_rss_mb"] > 0 and r["build_commit"] != ""' &&
  check_json 'r["servers"] == 1 and r["worker_voluntary_switches"] > 0 and r["server_voluntary_switches"] > 0' &&
  check_json 'r["worker_involuntary_switches"] >= 0 and r["server_involuntary_switches"] >= 0' &&
  check_json '"iperf3_gbps" not in r and "iperf3_bidir_gbps" not in r'; then
  if [[ ! -s "$TMP/result.json" ]] || ! grep -q '"bytes_sent":4800000' "$TMP/result.json"; then
    fail "--result_json not written"
  elif ! grep -q "all workers done" "$TMP/loopback/server.log"; then
    fail "the server did not end cleanly"
  else
    ok
  fi
fi

case_name="loopback after 1 s of iperf3 and 1 s of both directions (two opposite pairs): host CPU per GB of each, and the ratios"
output="$TMP/iperf3.out"
if ! command -v iperf3 >/dev/null; then
  p3_skip "$case_name" "iperf3 is not installed"
else
  # 2 M parameters x 10 iterations: long enough for the host's 1/100 s counters to move.
  "$BENCH" --server_binary="$SERVER" --params=2000000 --tensors=4 --slice_params=40000 \
    --warmup=1 --iterations=10 --iperf3_seconds=1 --out_dir="$TMP/iperf3" >"$output" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "exit status $rc"
  elif check_json 'r["iperf3_gbps"] > 0 and r["ratio"] > 0 and r["iperf3_bytes"] > 0' &&
    check_json 'r["host_cpu_s_per_gb"] > 0 and r["iperf3_host_cpu_s_per_gb"] > 0' &&
    check_json 'r["iperf3_host_busy_s"] >= r["iperf3_softirq_s"] >= 0' &&
    check_json 'abs(r["iperf3_host_cpu_s_per_gb"] - r["iperf3_host_busy_s"] / (r["iperf3_bytes"] / 1e9)) < 1e-9' &&
    check_json 'abs(r["cpu_ratio_to_iperf3"] - r["host_cpu_s_per_gb"] / r["iperf3_host_cpu_s_per_gb"]) < 1e-9' &&
    check_json 'r["cpu_ratio_to_iperf3"] > 0 and r["iperf3_cpu_s_per_gb"] > 0' &&
    check_json 'r["iperf3_sender_cpu_percent"] > 0 and r["iperf3_receiver_cpu_percent"] > 0' &&
    check_json 'r["iperf3_bidir_up_gbps"] > 0 and r["iperf3_bidir_down_gbps"] > 0' &&
    check_json 'abs(r["iperf3_bidir_gbps"] - (r["iperf3_bidir_up_gbps"] + r["iperf3_bidir_down_gbps"]) / 2) < 1e-9' &&
    check_json 'abs(r["ratio_to_iperf3_bidir"] - r["goodput_up_gbps"] / r["iperf3_bidir_gbps"]) < 1e-9' &&
    check_json 'r["iperf3_bidir_host_busy_s"] >= r["iperf3_bidir_softirq_s"] >= 0 and r["iperf3_bidir_cpu_s_per_gb"] > 0' &&
    check_json 'abs(r["iperf3_bidir_host_cpu_s_per_gb"] - r["iperf3_bidir_host_busy_s"] / (r["iperf3_bidir_bytes"] / 1e9)) < 1e-9' &&
    check_json 'abs(r["cpu_ratio_to_iperf3_bidir"] - r["host_cpu_s_per_gb"] / r["iperf3_bidir_host_cpu_s_per_gb"]) < 1e-9' &&
    check_json 'r["iperf3_bidir_method"] == "two_pairs"' &&
    check_json '"memcpy_gbps" not in r'; then
    # Two one-way pairs, the second reversed (-R): two reports, neither of them --bidir's.
    if [[ ! -s "$TMP/iperf3/iperf3_bidir_client.json" || ! -s "$TMP/iperf3/iperf3_bidir_reverse_client.json" ]] ||
      grep -q '"sum_received_bidir_reverse"' "$TMP/iperf3/iperf3_bidir_client.json" ||
      ! grep -q '"reverse":[[:space:]]*1' "$TMP/iperf3/iperf3_bidir_reverse_client.json"; then
      fail "no two opposite one-way reports beside the one-way one"
    else
      ok
    fi
  fi
fi

case_name="--iperf3_bidir_method=bidir: iperf3 --bidir's one report, both directions"
output="$TMP/iperf3_bidir.out"
if ! command -v iperf3 >/dev/null; then
  p3_skip "$case_name" "iperf3 is not installed"
else
  "$BENCH" --server_binary="$SERVER" --params=400000 --tensors=4 --slice_params=10000 \
    --warmup=1 --iterations=2 --iperf3_seconds=1 --iperf3_bidir_method=bidir \
    --out_dir="$TMP/iperf3_bidir" >"$output" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "exit status $rc"
  elif check_json 'r["iperf3_bidir_method"] == "bidir"' &&
    check_json 'r["iperf3_bidir_up_gbps"] > 0 and r["iperf3_bidir_down_gbps"] > 0'; then
    if ! grep -q '"sum_received_bidir_reverse"' "$TMP/iperf3_bidir/iperf3_bidir_client.json" ||
      [[ -e "$TMP/iperf3_bidir/iperf3_bidir_reverse_client.json" ]]; then
      fail "not one iperf3 --bidir report"
    else
      ok
    fi
  fi
fi

case_name="--iperf3_bidir_method takes two_pairs or bidir, and says so"
output="$TMP/iperf3_method.out"
"$BENCH" --server_binary="$SERVER" --params=400000 --iterations=1 --warmup=1 \
  --iperf3_bidir_method=sideways --out_dir="$TMP/iperf3_method" >"$output" 2>&1
rc=$?
if [[ $rc -eq 0 ]]; then
  fail "a bad --iperf3_bidir_method was accepted"
elif ! grep -q 'iperf3_bidir_method: "sideways" is not two_pairs or bidir' "$output"; then
  fail "no clear error"
else
  ok
fi

case_name="--iperf3_bidir=false: the one-way iperf3 only"
output="$TMP/iperf3_oneway.out"
if ! command -v iperf3 >/dev/null; then
  p3_skip "$case_name" "iperf3 is not installed"
else
  "$BENCH" --server_binary="$SERVER" --params=400000 --tensors=4 --slice_params=10000 \
    --warmup=1 --iterations=2 --iperf3_seconds=1 --iperf3_bidir=false \
    --out_dir="$TMP/iperf3_oneway" >"$output" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "exit status $rc"
  elif check_json 'r["iperf3_gbps"] > 0' &&
    check_json 'not any(k.startswith("iperf3_bidir") or k.endswith("iperf3_bidir") for k in r)'; then
    if [[ -e "$TMP/iperf3_oneway/iperf3_bidir_client.json" ]]; then
      fail "iperf3 --bidir ran"
    else
      ok
    fi
  fi
fi

case_name="--shared_memory: exact byte counts, memcpy measured beside the run"
output="$TMP/shared.out"
"$BENCH" --server_binary="$SERVER" --params=400000 --tensors=4 --slice_params=10000 \
  --warmup=1 --iterations=3 --shared_memory --memcpy_runs=3 --out_dir="$TMP/shared" \
  >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif check_json 'r["shared_memory"] and r["bytes_sent"] == r["bytes_received"] == 3 * 400000 * 4' &&
  check_json 'r["memcpy_bytes"] == 64 << 20 and r["memcpy_gbps"] > 0 and r["memcpy_cpu_s_per_gb"] > 0' &&
  check_json 'abs(r["goodput_to_memcpy"] - r["goodput_up_gbps"] / r["memcpy_gbps"]) < 1e-9' &&
  check_json 'r["goodput_to_memcpy"] > 0 and "iperf3_gbps" not in r'; then
  ok
fi

case_name="--servers=3 with a 1 MiB credit: three servers share the worker's slices; exact byte counts, every server ends cleanly"
output="$TMP/servers.out"
"$BENCH" --server_binary="$SERVER" --params=400000 --tensors=4 --slice_params=10000 \
  --warmup=1 --iterations=3 --servers=3 --credit_bytes=1048576 --out_dir="$TMP/servers" \
  >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif check_json 'r["servers"] == 3 and r["bytes_sent"] == r["bytes_received"] == 3 * 400000 * 4' &&
  check_json 'r["server_voluntary_switches"] > 0 and r["server_cpu_s"] >= 0' &&
  check_json 'r["credit_bytes"] == 1048576'; then
  missing=""
  for log in server.log server_1.log server_2.log; do
    # The worker says goodbye to each of its streams; a server ends once its worker has.
    grep -q "all workers done" "$TMP/servers/$log" || missing="$missing $log"
  done
  if [[ -n "$missing" ]]; then fail "not ended cleanly:$missing"; else ok; fi
fi

case_name="--servers out of 1..8, several with --shared_memory, or a negative --credit_bytes: refused with the reason"
output="$TMP/servers_bad.out"
"$BENCH" --server_binary="$SERVER" --servers=0 --out_dir="$TMP/servers_bad" >"$output" 2>&1
rc0=$?
"$BENCH" --server_binary="$SERVER" --servers=2 --shared_memory --out_dir="$TMP/servers_bad" \
  >>"$output" 2>&1
rc1=$?
"$BENCH" --server_binary="$SERVER" --credit_bytes=-1 --out_dir="$TMP/servers_bad" >>"$output" 2>&1
rc2=$?
if [[ $rc0 -ne 1 || $rc1 -ne 1 || $rc2 -ne 1 ]]; then
  fail "exit status $rc0 / $rc1 / $rc2, expected 1 / 1 / 1"
elif ! grep -q -- "--servers must be 1..8" "$output" ||
  ! grep -q -- "--shared_memory takes one server" "$output" ||
  ! grep -q -- "--credit_bytes must be >= 0" "$output"; then
  fail "no reason given"
else
  ok
fi

case_name="--iperf3_seconds=0.5: refused (iperf3's -t takes whole seconds; -t 0 never ends)"
output="$TMP/iperf3_half.out"
"$BENCH" --server_binary="$SERVER" --iperf3_seconds=0.5 --out_dir="$TMP/iperf3_half" >"$output" 2>&1
rc=$?
if [[ $rc -ne 1 ]]; then
  fail "exit status $rc, expected 1"
elif ! grep -q -- "--iperf3_seconds takes whole seconds" "$output"; then
  fail "no reason given"
else
  ok
fi

case_name="no --server_binary: exit 1 with the reason"
output="$TMP/noserver.out"
"$BENCH" >"$output" 2>&1
rc=$?
if [[ $rc -ne 1 ]]; then
  fail "exit status $rc, expected 1"
elif ! grep -q -- "--server_binary is required" "$output"; then
  fail "no reason given"
else
  ok
fi

case_name="bench_streaming.py --report: medians per rate into the page's table"
output="$TMP/report.out"
cat >"$TMP/s.csv" <<'CSV'
date,commit,rate_gbps,run,iperf3_gbps,goodput_gbps,ratio,cpu_s_per_gb,worker_cpu_s,worker_training_thread_cpu_s,server_cpu_s,seconds,bytes_sent,bytes_received,params,tensors,slice_params,iterations,load1_start,load1_end
x,c,1.0,0,0.95,0.90,0.947,2.5,1.0,0.1,1.0,3.5,400000000,400000000,25000000,10,40000,4,1.5,2.0
x,c,1.0,1,0.96,0.80,0.833,2.7,1.1,0.1,1.1,4.0,400000000,400000000,25000000,10,40000,4,2.5,2.0
x,c,1.0,2,0.95,0.85,0.895,2.6,1.0,0.1,1.1,3.8,400000000,400000000,25000000,10,40000,4,3.5,2.0
x,c,0.0,0,10.0,2.5,0.25,1.6,1.6,0.3,1.6,3.0,1000000000,1000000000,25000000,10,40000,10,3.0,4.0
CSV
printf '# t\n\n<!-- streaming-table:begin (tools/bench_streaming.py) -->\nold\n<!-- streaming-table:end -->\ntail\n' >"$TMP/s.md"
"$PY" tools/bench_streaming.py --report --csv="$TMP/s.csv" --md="$TMP/s.md" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^| 1 | 0.95 (0.95–0.96) | 0.85 (0.80–0.90) | 0.90 (0.83–0.95) | 2.60 (2.50–2.70) | 1.25 / 1.38 | 3 | 1.5–3.5 |$' "$TMP/s.md" ||
  ! grep -q '^| unlimited (loopback) |' "$TMP/s.md" || grep -q '^old$' "$TMP/s.md" ||
  ! grep -q '^tail$' "$TMP/s.md"; then
  cp "$TMP/s.md" "$output"
  fail "unexpected table"
else
  ok
fi

case_name="bench_streaming.py --report: the host's CPU per GB where every run has it"
output="$TMP/report_host.out"
{
  head -1 "$TMP/s.csv" | sed 's/$/,host_cpu_s_per_gb,host_busy_s,host_softirq_s/'
  tail -n +2 "$TMP/s.csv" | sed 's/$/,3.0,2.4,0.8/'
} >"$TMP/h.csv"
"$PY" tools/bench_streaming.py --report --csv="$TMP/h.csv" --md="$TMP/s.md" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^| 1 | 0.95 (0.95–0.96) | 0.85 (0.80–0.90) | 0.90 (0.83–0.95) | 2.60 (2.50–2.70) | 1.25 / 1.38 | 3.00 (3.00–3.00) (1.00) | 3 | 1.5–3.5 |$' "$TMP/s.md" ||
  ! grep -q 'host CPU s/GB (of it softirq)' "$TMP/s.md"; then
  cp "$TMP/s.md" "$output"
  fail "unexpected table"
else
  ok
fi

case_name="bench_streaming.py --report: iperf3's host CPU and memcpy columns, blank where a run lacks them"
output="$TMP/report_new.out"
{
  head -1 "$TMP/h.csv" | sed 's/$/,iperf3_host_cpu_s_per_gb,iperf3_softirq_s,iperf3_bytes,cpu_ratio_to_iperf3,shared_memory,memcpy_gbps,goodput_to_memcpy,memcpy_cpu_s_per_gb/'
  # A rate from before the columns, then loopback and shared memory with them.
  sed -n 2p "$TMP/h.csv" | sed 's/$/,,,,,,,,/'
  sed -n 5p "$TMP/h.csv" | sed 's/$/,0.5,0.1,2000000000,2.4,0,,,/'
  sed -n 5p "$TMP/h.csv" | sed 's/^x,c,0.0,0,10.0,2.5,0.25,/x,c,0.0,0,10.0,8.0,0.8,/; s/$/,0.8,0.1,1000000000,1.5,1,40.0,0.2,0.125/'
} >"$TMP/n.csv"
"$PY" tools/bench_streaming.py --report --csv="$TMP/n.csv" --md="$TMP/s.md" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '| iperf3 host CPU s/GB (of it softirq) | p3 ÷ iperf3 host CPU | memcpy Gbit/s (CPU s/GB) | goodput ÷ memcpy | runs | load1 |$' "$TMP/s.md" ||
  ! grep -q '^| 1 | 0.95 (0.95–0.95) | 0.90 (0.90–0.90) | .* | – | – | – | – | 1 | 1.5–1.5 |$' "$TMP/s.md" ||
  ! grep -q '^| unlimited (loopback) | 10.00 (10.00–10.00) | 2.50 (2.50–2.50) | .* | 0.50 (0.50–0.50) (0.05) | 2.40 (2.40–2.40) | – | – | 1 | 3.0–3.0 |$' "$TMP/s.md" ||
  ! grep -q '^| shared memory (colocated) | 10.00 (10.00–10.00) | 8.00 (8.00–8.00) | .* | 0.80 (0.80–0.80) (0.10) | 1.50 (1.50–1.50) | 40.0 (40.0–40.0) (0.12) | 0.20 (0.20–0.20) | 1 | 3.0–3.0 |$' "$TMP/s.md"; then
  cp "$TMP/s.md" "$output"
  fail "unexpected table"
else
  ok
fi

case_name="bench_streaming.py --report: iperf3 --bidir's columns beside one-way iperf3's, blank where a run lacks them"
output="$TMP/report_bidir.out"
{
  head -1 "$TMP/n.csv" | sed 's/$/,iperf3_bidir_gbps,iperf3_bidir_bytes,iperf3_bidir_softirq_s,iperf3_bidir_host_cpu_s_per_gb,ratio_to_iperf3_bidir,cpu_ratio_to_iperf3_bidir/'
  sed -n 2p "$TMP/n.csv" | sed 's/$/,,,,,,/'  # a run from before --bidir
  sed -n 3p "$TMP/n.csv" | sed 's/$/,5.0,2000000000,0.2,0.6,0.5,2.0/'
} >"$TMP/b.csv"
"$PY" tools/bench_streaming.py --report --csv="$TMP/b.csv" --md="$TMP/s.md" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '| p3 ÷ iperf3 host CPU | iperf3 bidir Gbit/s each way | p3 ÷ iperf3 bidir | iperf3 bidir host CPU s/GB (of it softirq) | p3 ÷ iperf3 bidir host CPU | runs | load1 |$' "$TMP/s.md" ||
  ! grep -q '^| 1 | 0.95 (0.95–0.95) | 0.90 (0.90–0.90) | .* | – | – | – | – | – | – | 1 | 1.5–1.5 |$' "$TMP/s.md" ||
  ! grep -q '^| unlimited (loopback) | 10.00 (10.00–10.00) | 2.50 (2.50–2.50) | .* | 0.50 (0.50–0.50) (0.05) | 2.40 (2.40–2.40) | 5.00 (5.00–5.00) | 0.50 (0.50–0.50) | 0.60 (0.60–0.60) (0.10) | 2.00 (2.00–2.00) | 1 | 3.0–3.0 |$' "$TMP/s.md"; then
  cp "$TMP/s.md" "$output"
  fail "unexpected table"
else
  ok
fi

case_name="bench_streaming.py --report: a row per rate and slice size where the runs have several sizes"
output="$TMP/report_sizes.out"
{
  cat "$TMP/s.csv"
  sed -n 5p "$TMP/s.csv" | sed 's/,40000,10,/,640000,10,/; s/,2.5,0.25,1.6,/,5.0,0.5,0.8,/'
} >"$TMP/z.csv"
"$PY" tools/bench_streaming.py --report --csv="$TMP/z.csv" --md="$TMP/s.md" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^| 1, slices of 40,000 | 0.95 (0.95–0.96) | 0.85 (0.80–0.90) |' "$TMP/s.md" ||
  ! grep -q '^| unlimited (loopback), slices of 40,000 | 10.00 (10.00–10.00) | 2.50 (2.50–2.50) | 0.25 (0.25–0.25) | 1.60 ' "$TMP/s.md" ||
  ! grep -q '^| unlimited (loopback), slices of 640,000 | 10.00 (10.00–10.00) | 5.00 (5.00–5.00) | 0.50 (0.50–0.50) | 0.80 ' "$TMP/s.md"; then
  cp "$TMP/s.md" "$output"
  fail "unexpected table"
else
  ok
fi

case_name="bench_streaming.py --append: a loopback run added after an older CSV's runs"
output="$TMP/append.out"
cp "$TMP/s.csv" "$TMP/a.csv"
"$PY" tools/bench_streaming.py --rates=0 --runs=1 --iperf3_seconds=0 --params=400000 --slice_params=10000 \
  --iterations=2 --bench="$BENCH" --server="$SERVER" --out_dir="$TMP/append" \
  --csv="$TMP/a.csv" --md= --append >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! "$PY" - "$TMP/a.csv" >>"$output" 2>&1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 5, len(rows)
assert [r["goodput_gbps"] for r in rows[:4]] == ["0.90", "0.80", "0.85", "2.5"], rows[:4]
new = rows[4]
assert new["rate_gbps"] == "0.0" and new["run"] == "3", new  # runs continue after 0 - 2
assert float(new["goodput_gbps"]) > 0 and new["host_busy_s"] != "", new
assert rows[0]["host_busy_s"] == "", rows[0]  # the older runs had no host columns
assert rows[0]["iperf3_bidir_gbps"] == "" and new["iperf3_bidir_gbps"] == "", rows  # no iperf3
PY
then
  fail "unexpected CSV"
elif ! grep -q -- "--iperf3_bidir=true" "$output"; then
  fail "iperf3 --bidir not asked for by default"
elif ! grep -q "wrote 1 runs to .* after the 4 it had" "$output"; then
  fail "no count of the runs kept"
else
  ok
fi

case_name="bench_streaming.py --append: a CSV of something else is refused, unchanged"
output="$TMP/append_bad.out"
printf 'model,samples_per_second\nresnet50,1.0\n' >"$TMP/other.csv"
cp "$TMP/other.csv" "$TMP/other_before.csv"
"$PY" tools/bench_streaming.py --rates=0 --runs=1 --params=400000 --iterations=2 \
  --bench="$BENCH" --server="$SERVER" --out_dir="$TMP/append_bad" --csv="$TMP/other.csv" \
  --md= --append >"$output" 2>&1
rc=$?
if [[ $rc -eq 0 ]]; then
  fail "exit status 0"
elif ! grep -q "is not a CSV of this benchmark (columns model, samples_per_second)" "$output"; then
  fail "no reason naming the columns"
elif ! cmp -s "$TMP/other.csv" "$TMP/other_before.csv"; then
  fail "the file was changed"
else
  ok
fi

case_name="the heaps in huge pages unless GLIBC_TUNABLES says otherwise, the process started again under its own name; --trace_json: the worker's timeline"
output="$TMP/huge.out"
env -u GLIBC_TUNABLES "$BENCH" --server_binary="$SERVER" --params=400000 --tensors=4 \
  --slice_params=10000 --warmup=1 --iterations=2 --out_dir="$TMP/huge" \
  --trace_json="$TMP/huge_trace.json" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif check_json 'r["glibc_tunables"] == "glibc.malloc.hugetlb=1"' &&
  check_json 'r["process_name"] == "bench_streaming"' &&
  check_json 'r["window_start_us"] < r["window_end_us"]'; then
  if ! "$PY" - "$TMP/huge_trace.json" "$output" >>"$output.check" 2>&1 <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
r = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name" and e["pid"] == 100}
assert {"compute", "send to server 0", "receive from server 0"} <= tracks, tracks
done = [e for e in events if e.get("ph") == "X"]
assert all(e["pid"] == 100 for e in done), "not worker 0's"
# Every slice of the measured window's 2 iterations went up and came back: 40 a way each.
inside = [e for e in done if r["window_start_us"] <= e["ts"] <= r["window_end_us"]]
assert sum(e["name"].startswith("gradient ") for e in inside) == 80, inside[:3]
assert sum(e["name"].startswith("params ") for e in inside) == 80, inside[:3]
PY
  then
    fail "the trace is not the worker's timeline"
  else
    output="$TMP/huge_off.out"
    GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "$BENCH" --server_binary="$SERVER" --params=400000 \
      --tensors=4 --slice_params=10000 --warmup=1 --iterations=1 --out_dir="$TMP/huge_off" \
      >"$output" 2>&1
    rc=$?
    if [[ $rc -ne 0 ]]; then
      fail "exit status $rc with GLIBC_TUNABLES=glibc.malloc.hugetlb=0"
    elif check_json 'r["glibc_tunables"] == "glibc.malloc.hugetlb=0"'; then
      ok
    fi
  fi
fi

case_name="reads sized to the message unless told otherwise: GRPC_EXPERIMENTS set for both processes; --sized_reads=false or the environment's own value wins; exact byte counts at 160 kB messages"
output="$TMP/sized.out"
env -u GRPC_EXPERIMENTS "$BENCH" --server_binary="$SERVER" --params=800000 --tensors=4 \
  --slice_params=40000 --warmup=1 --iterations=3 --out_dir="$TMP/sized" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif check_json 'r["grpc_experiments"] == "tcp_frame_size_tuning,tcp_rcv_lowat"' &&
  check_json 'r["bytes_sent"] == 3 * 800000 * 4 and r["bytes_received"] == 3 * 800000 * 4'; then
  if ! grep -q "sized_reads: true" "$TMP/sized/server.textproto"; then
    fail "the server's config does not ask for sized reads"
  else
    output="$TMP/sized_off.out"
    env -u GRPC_EXPERIMENTS "$BENCH" --server_binary="$SERVER" --params=400000 --tensors=4 \
      --slice_params=10000 --warmup=1 --iterations=1 --sized_reads=false \
      --out_dir="$TMP/sized_off" >"$output" 2>&1
    rc=$?
    if [[ $rc -ne 0 ]]; then
      fail "exit status $rc with --sized_reads=false"
    elif ! grep -q "sized_reads: false" "$TMP/sized_off/server.textproto"; then
      fail "--sized_reads=false did not reach the server's config"
    elif check_json 'r["grpc_experiments"] == ""'; then
      output="$TMP/sized_env.out"
      GRPC_EXPERIMENTS= "$BENCH" --server_binary="$SERVER" --params=400000 --tensors=4 \
        --slice_params=10000 --warmup=1 --iterations=1 --out_dir="$TMP/sized_env" \
        >"$output" 2>&1
      rc=$?
      if [[ $rc -ne 0 ]]; then
        fail "exit status $rc with GRPC_EXPERIMENTS="
      elif check_json 'r["grpc_experiments"] == ""'; then
        ok
      fi
    fi
  fi
fi

case_name="bench_streaming.py --shared_memory: loopback, then the shared-memory path, in one command"
output="$TMP/py_shared.out"
"$PY" tools/bench_streaming.py --rates=0 --shared_memory --runs=1 --iperf3_seconds=0 \
  --no_iperf3_bidir --params=400000 --slice_params=10000 --iterations=2 --bench="$BENCH" --server="$SERVER" \
  --out_dir="$TMP/py_shared" --csv="$TMP/py_shared.csv" --md= >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! "$PY" - "$TMP/py_shared.csv" >>"$output" 2>&1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["shared_memory"] for r in rows] == ["0", "1"], rows
assert rows[0]["memcpy_gbps"] == "" and float(rows[1]["memcpy_gbps"]) > 0, rows
assert float(rows[1]["goodput_to_memcpy"]) > 0 and float(rows[1]["memcpy_cpu_s_per_gb"]) > 0, rows
# Each binary's own record of its commit was found in it ("unstamped" in a plain build).
assert all(r["commit"] not in ("", "unknown") and r["server_commit"] not in ("", "unknown")
           for r in rows), rows
PY
then
  fail "unexpected CSV"
elif [[ $(grep -c -- "--iperf3_bidir=false" "$output") -ne 2 ]]; then
  fail "--no_iperf3_bidir not passed on to each run"
elif ! grep -q '^| shared memory (colocated) | – | ' "$output" ||
  ! grep -q '^| unlimited (loopback) | – | .* | – | – | 1 | ' "$output"; then
  fail "no shared-memory row in the table"
else
  ok
fi

finish_cases
