#!/usr/bin/env bash
# The data path's defaults, A/B: scheduling.credit_bytes and network.tcp_notsent_lowat at
# the previous defaults (0, the kernel's) against the measured best (1 MiB, 128 kB),
# ResNet-50 p3 with 2 workers + 2 servers over emulated links, in interleaved rounds
# (each round runs both settings at every rate). Needs root (emulated links).
#
#   sudo tools/experiments/data_path_defaults.sh [ROUNDS] [RATES] > docs/results/throughput/data_path_defaults_<date>.csv
# Defaults: 5 rounds, rates 1,2.5,5,0 (0: unlimited). Run from the repository root after
# `bazel build //tools:launch_cluster //server:p3_server //worker:p3_worker`.
# BENCH_THROUGHPUT (default tools/bench_throughput.py, run by /usr/bin/python3) is the
# benchmark; its `run` writes <out>/raw.csv.
set -euo pipefail
bench=${BENCH_THROUGHPUT:-tools/bench_throughput.py}
rounds=${1:-5}
rates=${2:-1,2.5,5,0}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
header=""
for round in $(seq 1 "$rounds"); do
  for setting in old new; do
    if [[ $setting == old ]]; then
      sets=(--set=scheduling.credit_bytes=0 --set=network.tcp_notsent_lowat=0)
    else
      sets=(--set=scheduling.credit_bytes=1048576 --set=network.tcp_notsent_lowat=131072)
    fi
    /usr/bin/python3 "$bench" run --model=resnet50 --modes=p3 \
      --bandwidths="$rates" --runs=1 --out="$out/$round-$setting" "${sets[@]}" >/dev/null
    csv="$out/$round-$setting/raw.csv"
    if [[ -z $header ]]; then
      header="setting,round,$(head -1 "$csv")"
      echo "$header"
    fi
    tail -n +2 "$csv" | sed "s/^/$setting,$round,/"
  done
done
