#!/usr/bin/env bash
# The pipeline's speed-up over one stage, both with the allocator tuned
# (docs/results/pipeline/pipeline.md, "Against a tuned single stage"): interleaved rounds,
# each running one stage and then every pipelined weight mode with 2 stages, ResNet-50 at
# 32x32, batch 32, synthetic data. One CSV line per run on stdout.
#
#   tools/experiments/pipeline_tuned_speedup.sh [PIPELINE_TRAIN] [ROUNDS] [ITERATIONS] \
#       > docs/results/pipeline/pipeline_tuned_speedup_<date>.csv
# Defaults: bazel-bin/tools/pipeline_train, 3, 128. Run from the repository root, on an
# otherwise idle machine (load1 is recorded before each run).
set -euo pipefail
binary=${1:-bazel-bin/tools/pipeline_train}
rounds=${2:-3}
iterations=${3:-128}
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
echo "round,weights,stages,samples_per_second,wall_seconds,load1_before"
for round in $(seq 1 "$rounds"); do
  for spec in "spectrain 1" "spectrain 2" "pipedream 2" "stale 2" "vanilla 2"; do
    read -r weights stages <<<"$spec"
    load=$(cut -d' ' -f1 /proc/loadavg)
    result=$("$binary" --config=configs/pipeline_spectrain.textproto \
      --set=model.name=resnet50 --set=model.image_size=32 --set=model.in_channels=3 \
      --set=model.num_classes=1000 --set=data.dataset=synthetic --set=data.synthetic_size=4096 \
      --set=training.batch_size=32 --set=training.iterations="$iterations" \
      --set=training.evaluate=false --set=pipeline.weights="$weights" \
      --set=pipeline.stages="$stages" --set=output_dir="$out_dir" | sed -n 's/^RESULT //p')
    figures=$(/usr/bin/python3 -c 'import json, sys
r = json.loads(sys.argv[1]); print("%s,%s" % (r["samples_per_second"], r["wall_seconds"]))' \
      "$result")
    echo "$round,$weights,$stages,$figures,$load"
  done
done
