#!/usr/bin/env bash
# The tables of tools/experiments/simulator_cpu_breakdown.py --table,
# simulator_side_by_side.py --table, simulator_preemption_cost.py --table and
# tools/bench_throughput.py's report, from small CSVs (docs/results/simulator/simulator.md,
# "Where the CPU goes"): medians over rounds, the preemption and wake-up rows summed over a
# round's threads, the side-by-side factors; and
# tools/experiments/throughput_congestion_control.py (medians per congestion control, the
# ratios).
# Runs from the runfiles tree (bazel test), where the paths below are relative.
set -uo pipefail

source tests/testing/cases.sh

PY=/usr/bin/python3
X=tools/experiments
TMP="${TEST_TMPDIR:-$(mktemp -d)}"

case_name="simulator_cpu_breakdown.py --table: medians of 3 rounds; preemptions and wake-ups"
output="$TMP/cpu.out"
H="time_utc,round,model,mode,bandwidth_gbps,workers,placement,slice_params,window_iterations,iteration_seconds,samples_per_second,group,core_s_per_iteration,voluntary_switches_per_iteration,involuntary_switches_per_iteration"
{
  echo "$H"
  for r in 1 2 3; do
    main=$(echo "0.9 1.0 1.3" | cut -d' ' -f$r)
    echo "t,$r,resnet50,p3,2.0,2,colocated,40000,37,0.9$r,17.0,worker:main,$main,10,100$r"
    echo "t,$r,resnet50,p3,2.0,2,colocated,40000,37,0.9$r,17.0,worker:p3_worker,0.3,500,5"
    echo "t,$r,resnet50,p3,2.0,2,colocated,40000,37,0.9$r,17.0,server:grpcpp_sync_ser,0.4,700,7"
    echo "t,$r,resnet50,p3,2.0,2,colocated,40000,37,0.9$r,17.0,host:idle,0.02,,"
  done
} >"$TMP/cpu.csv"
"$PY" $X/simulator_cpu_breakdown.py --table --csv="$TMP/cpu.csv" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^| iteration (s) | 0.920 |$' "$output" ||
  ! grep -q '^| worker:main | 1.000 |$' "$output" ||
  ! grep -q '^| server:grpcpp_sync_ser | 0.400 |$' "$output" ||
  ! grep -q '^| host:idle | 0.020 |$' "$output" ||
  ! grep -q "^| preemptions of the workers' main threads, per iteration | 1002 |$" "$output" ||
  ! grep -q '^| sleeps of all other threads (wake-ups), per iteration | 1200 |$' "$output"; then
  fail "unexpected table"
else
  ok
fi

case_name="simulator_cpu_breakdown.py --table: a CSV from before the switch columns has no such rows"
output="$TMP/old.out"
cut -d, -f1-13 "$TMP/cpu.csv" >"$TMP/old.csv"
"$PY" $X/simulator_cpu_breakdown.py --table --csv="$TMP/old.csv" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^| worker:main | 1.000 |$' "$output" || grep -q 'preemptions' "$output"; then
  fail "unexpected table"
else
  ok
fi

case_name="simulator_side_by_side.py --table: the rounds and their medians"
output="$TMP/sbs.out"
cat >"$TMP/sbs.csv" <<'CSV'
time_utc,round,local_alone_core_s,pair_core_s,pair_beside_core_s,pair_speed,compute_speed,streaming_alone_cpu_s_per_gb,streaming_beside_cpu_s_per_gb,comm_factor,pair_beside_iterations,streaming_alone_gbps,streaming_beside_gbps
t,1,0.40,0.40,0.50,1.0,0.8,2.0,1.8,0.9,30,4.0,3.0
t,2,0.40,0.44,0.44,0.9,0.9,2.0,2.2,1.1,30,4.0,3.0
t,3,0.40,0.42,0.40,0.95,1.0,2.0,2.0,1.0,30,4.0,3.0
CSV
"$PY" $X/simulator_side_by_side.py --table --csv="$TMP/sbs.csv" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^| 1 | 0.400 / 0.400 / 0.500 | 1.000 / 0.800 | 2.00 / 1.80 | 0.900 |$' "$output" ||
  ! grep -q '^| median of 3 | | 0.950 / 0.900 | | 1.000 |$' "$output"; then
  fail "unexpected table"
else
  ok
fi

case_name="simulator_preemption_cost.py --table: cost per preemption against the same round's none"
output="$TMP/pre.out"
cat >"$TMP/pre.csv" <<'CSV'
time_utc,round,condition,iterations,seconds_per_iteration,core_s_per_iteration,preemptions_per_iteration,voluntary_per_iteration,disturber_wakes_per_iteration,disturber_core_s_per_iteration,extra_core_s_per_iteration,extra_preemptions_per_iteration,us_per_preemption
t,1,none,40,0.50,0.5000,1.0,0.0,0.0,0.0,,,
t,1,same:1000:0,40,0.60,0.5100,501.0,0.0,500.0,0.01,0.01,500.0,20.0
t,2,same:1000:0,40,0.60,0.5300,1001.0,0.0,1000.0,0.01,0.02,1000.0,20.0
t,2,none,40,0.50,0.5100,1.0,0.0,0.0,0.0,,,
t,3,none,40,0.50,0.4900,1.0,0.0,0.0,0.0,,,
t,3,same:1000:0,40,0.60,0.5200,3.0,0.0,900.0,0.01,0.03,2.0,
CSV
"$PY" $X/simulator_preemption_cost.py --table --csv="$TMP/pre.csv" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^| none | 0.5000 | 1 | 0 | – | – |$' "$output" ||
  ! grep -q '^| same:1000:0 | 0.5200 (1.040) | 501 | 900 | 20.0 / 20.0 | 20.0 |$' "$output"; then
  fail "unexpected table"
else
  ok
fi

case_name="bench_throughput_report.py tables: a column per mode that was run, the source named"
output="$TMP/bt.out"
"$PY" - >"$output" 2>&1 <<'PYCODE'
import sys
sys.path.insert(0, "tools")
import bench_throughput_report as bt
def g(mode, sps, runs=2):
    return {"model": "resnet50", "mode": mode, "bandwidth_gbps": 1.0, "batch": 8, "workers": 2,
            "slice_params": "40000", "runs": runs, "median_sps": sps, "min_sps": sps - 1,
            "max_sps": sps + 1, "compute_bound_sps": 100.0, "bandwidth_bound_sps": 18.7,
            "efficiency": 0.8}
def r(mode, sps):
    return {"model": "resnet50", "mode": mode, "bandwidth_gbps": "1.0", "workers": "2",
            "slice_params": "40000", "samples_per_second": str(sps)}
agg = [g("baseline", 10.0), g("p3", 16.0)]
rows = [r("baseline", 10.0), r("p3", 16.0), r("baseline", 8.0), r("p3", 16.0)]
print(bt.markdown_tables(agg, rows, 40000, "out/x/raw.csv"))
PYCODE
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q 'from out/x/raw.csv; do not edit' "$output" ||
  ! grep -q '^| Gbit/s | baseline | p3 | compute bound | bandwidth bound | p3 ÷ baseline (paired) | p3 efficiency |$' "$output" ||
  ! grep -q '^| 1 | 10.0 (9.0–11.0) | 16.0 (15.0–17.0) | 100.0 | 18.7 | 1.60 (1.80) | 0.8 |$' "$output"; then
  fail "unexpected table"
else
  ok
fi

case_name="throughput_congestion_control.py: medians under each, their ratio, p3 over baseline, DDP, bound"
output="$TMP/cc.out"
{
  echo "model,mode,batch_per_worker,bandwidth_gbps,samples_per_second,status,congestion_control"
  for v in 18.0 18.2 18.4; do echo "resnet50,p3,8,1.0,$v,ok,bbr"; done
  for v in 9.0 10.0 11.0; do echo "resnet50,baseline,8,1.0,$v,ok,bbr"; done
  for v in 15.0 16.0; do echo "resnet50,ddp,8,1.0,$v,ok,bbr"; done
  for v in 18.0 18.2 99.0; do echo "resnet50,p3,8,1.0,$v,ok,cubic"; done
  echo "resnet50,p3,8,1.0,1.0,failed:1,cubic"
  for v in 13.0 14.0 14.5; do echo "resnet50,baseline,8,1.0,$v,ok,cubic"; done
  echo "resnet50,p3,8,2.5,30.0,ok,bbr"  # another bandwidth: rows of its own
  echo "resnet50,p3,8,2.5,31.5,ok,cubic"
} >"$TMP/cc.csv"
"$PY" $X/throughput_congestion_control.py "$TMP/cc.csv" >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q '^| resnet50 | 1 | p3 | 18.20 (18.00 – 18.40) | 18.20 (18.00 – 99.00) | 1.00 |$' "$output" ||
  ! grep -q '^| resnet50 | 1 | baseline | 10.00 (9.00 – 11.00) | 14.00 (13.00 – 14.50) | 1.40 |$' "$output" ||
  grep -q '^| resnet50 | 1 | ddp |' "$output" ||
  ! grep -q '^| resnet50 | 1 | 1.82 | 1.30 | 1.17 | – | 0.97 | 0.97 |$' "$output" ||
  ! grep -q '^| resnet50 | 2.5 | p3 | 30.00 (30.00 – 30.00) | 31.50 (31.50 – 31.50) | 1.05 |$' "$output" ||
  ! grep -q '^16 runs; runs per point: 1, 2, 3$' "$output"; then
  fail "unexpected table: $(cat "$output")"
else
  ok
fi

finish_cases
