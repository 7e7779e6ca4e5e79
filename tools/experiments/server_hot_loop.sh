#!/bin/bash
# Runs //tools:bench_shard built at two commits, alternating, and writes one CSV line per
# run: build,run,<bench_shard's columns>. See docs/results/server_hot_loop/server_hot_loop.md
# for how the two binaries were built.
#   tools/experiments/server_hot_loop.sh /tmp/bench_old /tmp/bench_new 5 \
#       > docs/results/server_hot_loop/server_hot_loop.csv
set -euo pipefail
old=$1 new=$2 runs=${3:-5}
configs=(
  "--optimizer=sgd --workers=4 --slice_params=40000 --slices=64 --iterations=20"
  "--optimizer=adam --workers=4 --slice_params=40000 --slices=64 --iterations=20"
  "--optimizer=sgd --workers=4 --slice_params=4096 --slices=8 --iterations=200"
  "--optimizer=adam --workers=4 --slice_params=4096 --slices=8 --iterations=200"
  "--optimizer=sgd --workers=1 --slice_params=40000 --slices=64 --iterations=20"
)
echo "build,run,$("$new" --header --repeats=0)"
for run in $(seq 1 "$runs"); do
  for config in "${configs[@]}"; do
    for build in old new; do
      bin=$old
      [[ $build == new ]] && bin=$new
      # shellcheck disable=SC2086
      echo "$build,$run,$("$bin" $config)"
    done
  done
  # The memory floor under the SGD rows (bench_shard --memory_floor), new binary only.
  echo "floor,$run,$("$new" --memory_floor --slice_params=40000 --slices=64 --iterations=20)"
done
