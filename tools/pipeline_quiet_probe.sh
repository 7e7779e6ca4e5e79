#!/bin/bash
# The quiet-machine probe behind docs/results/pipeline_quiet_probe.csv (2026-12-01 10:25 UTC,
# binary of commit 2ae15a1, load average < 1.3): ResNet-50 at 2 stages, every weight mode and
# one thread, 40 mini-batches, twice, with the process's wall, user and system seconds.
# Usage: tools/pipeline_quiet_probe.sh BINARY OUT_DIR
cd "$(dirname "$0")/.."
B=${1:?binary}; OUT=${2:?out dir}; mkdir -p "$OUT"
base="--set=model.name=resnet50 --set=model.image_size=32 --set=model.in_channels=3 --set=data.dataset=synthetic --set=data.synthetic_size=1024 --set=training.batch_size=16 --set=optimizer.lr=0.001 --set=training.iterations=40 --set=training.evaluate=false"
for rep in 1 2; do
for m in "single pipeline.weights=vanilla pipeline.stages=1" "vanilla pipeline.weights=vanilla pipeline.stages=2" "stale pipeline.weights=stale pipeline.stages=2" "spectrain pipeline.weights=spectrain pipeline.stages=2" "pipedream pipeline.weights=pipedream pipeline.stages=2" "dp pipeline.weights=data_parallel pipeline.stages=2"; do
  set -- $m; name=$1; shift
  sets=""; for s in "$@"; do sets="$sets --set=$s"; done
  /usr/bin/time -f "$name rep$rep wall %e user %U sys %S" $B --config=configs/pipeline_spectrain.textproto $base $sets --result_file=$OUT/$name.$rep.json > $OUT/$name.$rep.log 2>$OUT/$name.$rep.time
  tail -1 $OUT/$name.$rep.time
  python3 -c "import json;r=json.load(open('$OUT/$name.$rep.json'));print('  sps',round(r['samples_per_second'],1), 'load', $(cut -d' ' -f1 /proc/loadavg))"
done; done
