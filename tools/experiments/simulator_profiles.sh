#!/usr/bin/env bash
# The simulator's committed CPU profiles of the zoo models that had none (issue 36, item 6:
# every config of configs/ and every zoo model predictable without extra files). Each is
# models/model_bench --profile (docs/simulator.md, "Profile files"): every block's forward
# and backward alone on a detached input, one libtorch thread, medians. The sizes are the
# configs': small_cnn b32 (configs/default.textproto and the other small_cnn configs),
# inception_v3 b8 at 75 x 75 and transformer b8 of 16 + 16 tokens (configs/bench/),
# row_lstm b64 (configs/pipeline_lstm.textproto's model), mlp b32, vgg16 b4 at 32 x 32 (as
# vgg19's). Prints the load before each, since the machine is shared.
#
#   bazel build //models:model_bench && bash tools/experiments/simulator_profiles.sh [MODEL ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${MODEL_BENCH:-bazel-bin/models/model_bench}
dir=configs/sim/profiles
declare -A args=(
  [small_cnn]="--batch=32 --runs=7 --profile=$dir/small_cnn_b32_cpu.json"
  [mlp]="--batch=32 --runs=7 --profile=$dir/mlp_b32_cpu.json"
  [row_lstm]="--batch=64 --runs=7 --profile=$dir/row_lstm_b64_cpu.json"
  [inception_v3]="--batch=8 --image_size=75 --runs=5 --profile=$dir/inception_v3_b8_i75_cpu.json"
  [vgg16]="--batch=4 --image_size=32 --runs=5 --profile=$dir/vgg16_b4_cpu.json"
  [transformer]="--batch=8 --seq_len=16 --runs=5 --profile=$dir/transformer_b8_cpu.json"
)
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(small_cnn mlp row_lstm inception_v3 vgg16 transformer)
for m in "${models[@]}"; do
  [[ -n "${args[$m]:-}" ]] || { echo "simulator_profiles.sh: no profile command for $m" >&2; exit 2; }
  echo "== $(date -u +%FT%TZ) load1 $(cut -d' ' -f1 /proc/loadavg): $m"
  # shellcheck disable=SC2086
  "$bench" --models="$m" --threads=1 ${args[$m]}
done
