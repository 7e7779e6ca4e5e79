#!/bin/bash
# How far a P3 run (2 workers, 2 servers) ends from `local` on the same global batches: the
# relative L2 distance of the two saved parameter vectors (model.pt), one CSV line per
# (model, iterations, oneDNN ISA). Both round differently (per-worker gradient sums against
# one batch); a model whose training amplifies that cannot hold a tight P3-against-local
# tolerance (docs/reliability.md, "Checked against `local` with real processes").
# Needs `bazel build //tools:launch_cluster //server:p3_server //worker:p3_worker` and
# /usr/bin/python3 with torch. Run from the repository root:
#   tools/experiments/p3_local_drift.sh "small_cnn:40 small_cnn:96 mlp:800" "AVX2 AVX512_CORE" \
#       > docs/results/reliability/p3_local_drift_2026-12-07.csv
# The MLP is given the synthetic images' 28 x 28 inputs (model.image_size).
set -euo pipefail
points=$1 isas=${2:-AVX512_CORE}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "model,iterations,onednn_isa,param_distance_p3_local,final_loss"
for isa in $isas; do
  for point in $points; do
    model=${point%:*} iterations=${point##*:} extra=""
    [[ $model == mlp ]] && extra="image_size: 28"
    out="$tmp/$model-$iterations-$isa"
    mkdir -p "$out"
    cat > "$out/c.textproto" <<CFG
name: "drift"
mode: "p3"
output_dir: "$out/p3"
cluster { workers: 2 servers: 2 }
model { name: "$model" $extra }
data { dataset: "synthetic" synthetic_size: 512 }
training { batch_size: 8 iterations: $iterations log_every: 100 evaluate: false }
optimizer { lr: 0.01 }
scheduling { slice_params: 20000 }
CFG
    for mode in p3 local; do
      DNNL_MAX_CPU_ISA=$isa bazel-bin/tools/launch_cluster --config="$out/c.textproto" \
        --set=mode=$mode --set=output_dir="$out/$mode" --plot=false \
        --server_binary=bazel-bin/server/p3_server --worker_binary=bazel-bin/worker/p3_worker \
        > "$out/$mode.log" 2>&1 || { tail -20 "$out/$mode.log" >&2; exit 1; }
    done
    /usr/bin/python3 - "$out/p3/model.pt" "$out/local/model.pt" "$out/p3/summary.json" \
        "$model,$iterations,$isa" <<'PY'
import json, sys
import torch
a, b = (torch.load(f) for f in sys.argv[1:3])
keys = [k for k in a if a[k].is_floating_point()]
diff = sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in keys)
norm = sum(float((a[k].double() ** 2).sum()) for k in keys)
loss = json.load(open(sys.argv[3])).get("final_loss")
print("%s,%.3g,%s" % (sys.argv[4], (diff / norm) ** 0.5, loss))
PY
  done
done
