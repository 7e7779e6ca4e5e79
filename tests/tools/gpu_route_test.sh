#!/usr/bin/env bash
# The GPU machine's build route (docs/building.md, "Building on a machine without Bazel"),
# taken here so that it cannot rot: tools/gpu/make_bundle.sh packs the bundle with a Bazel
# of its own, tools/gpu/build.sh builds it outside Bazel with the local g++ against the
# Python package's libtorch (Debian's python3-torch folder here, PyTorch's there) and the
# carried .debs unpacked into a private prefix, and the binaries it made train: the default
# experiment for a few iterations through launch_cluster, and a two-stage pipeline; and the
# GPU check (tools/gpu/check.py) runs end to end on them with device cpu.
#
# Runs Bazel inside the test ("local": not sandboxed; it reads the source tree through
# this script's own symlink). The nested Bazel keeps its output under
# ~/.cache/p3-gpu-route-bazel. Compiles at -O0 to stay inside CI's time.
set -uo pipefail

source tests/testing/cases.sh
source tests/testing/skip.sh

TMP="${TEST_TMPDIR:-$(mktemp -d)}"
PY=/usr/bin/python3
DATA=/usr/share/datasets/fashion-mnist

for tool in bazel dpkg apt-get readelf; do
  if ! command -v "$tool" >/dev/null; then
    p3_skip "gpu route" "no $tool on PATH"
    exit 0
  fi
done
torch=$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
if [[ -z "$torch" || ! -e "$torch/lib/libtorch.so" ]]; then
  p3_skip "gpu route" "no libtorch inside $PY's torch package (python3-torch)"
  exit 0
fi
if [[ ! -e "$DATA/train-images-idx3-ubyte.gz" ]]; then
  p3_skip "gpu route" "no Fashion-MNIST in $DATA (dataset-fashion-mnist)"
  exit 0
fi

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
home=$(getent passwd "$(id -u)" | cut -d: -f6)
cache="${home:-/tmp}/.cache"

# --- the bundle: sources, generated code, .debs, commands; at most 48 MiB ----------------
case_name=bundle
output="$TMP/bundle.out"
bundle="$TMP/p3-bundle.tar.gz"
if ! (cd "$repo" && env -u TEST_TMPDIR -u RUNFILES_DIR -u TEST_SRCDIR -u JAVA_RUNFILES \
        HOME="${home:-$TMP}" \
        BAZEL="bazel --output_user_root=$cache/p3-gpu-route-bazel --max_idle_secs=60" \
        tools/gpu/make_bundle.sh --out="$bundle") >"$output" 2>&1; then
  if grep -q "apt-get\|Unable to locate\|Failed to fetch" "$output"; then
    p3_skip "gpu route" "apt-get download failed (no apt lists?): $(tail -1 "$output")"
    exit 0
  fi
  fail "make_bundle.sh failed"
  finish_cases
fi
size=$(stat -c %s "$bundle")
[[ "$size" -le $((48 * 1024 * 1024)) ]] || fail "the bundle is $size bytes, over 48 MiB"
tar xzf "$bundle" -C "$TMP" || fail "the bundle does not unpack"
root="$TMP/p3-bundle"
for f in manifest.json BUNDLE.txt tools/gpu/build.sh bazel-out/k8-opt/bin/proto/p3.grpc.pb.cc; do
  [[ -e "$root/$f" ]] || fail "the bundle has no $f"
done
[[ $(ls "$root"/debs/*.deb | wc -l) -eq $(grep -v '^#' "$repo/tools/gpu/debs.txt" | grep -c .) ]] \
  || fail "the bundle does not carry every .deb of debs.txt"
ok

# --- it builds outside Bazel -----------------------------------------------------------------
case_name=build
output="$TMP/build.out"
if ! P3_LIBTORCH="$torch" P3_DEPS="$TMP/deps" "$root/tools/gpu/build.sh" --opt=-O0 \
    --jobs="$(nproc)" >"$output" 2>&1; then
  fail "build.sh failed"
  finish_cases
fi
while read -r target; do
  pkg=${target#//}
  bin="$root/bin/${pkg%%:*}/${target##*:}"
  [[ -x "$bin" ]] || fail "no binary for $target"
  # Debian's libraries come from the private prefix, found through the binary's RPATH.
  # (grep reads all of ldd's output: with -q it could stop early, and under pipefail
  # ldd's SIGPIPE would fail the check.)
  ldd "$bin" | grep -c "$TMP/deps/usr/lib/x86_64-linux-gnu/libabsl" >/dev/null ||
    fail "$target does not take Abseil from the prefix"
done < <(grep -v '^#' "$repo/tools/gpu/targets.txt" | grep .)
ok

# --- what it built trains ------------------------------------------------------------------
case_name=cluster
output="$TMP/cluster.out"
if ! (cd "$root/bin" && timeout 300 ./tools/launch_cluster --config=configs/default.textproto \
        --set=training.iterations=12 --set=training.evaluate=false --plot=false) \
    >"$output" 2>&1; then
  fail "launch_cluster of the bundle failed"
else
  json_check "$root/bin/out/default/summary.json" \
    's["iterations"] == 12 and len(s["workers_results"]) == 2' ||
    fail "summary.json: not 12 iterations of 2 workers"
  ok
fi

case_name=pipeline
output="$TMP/pipeline.out"
if ! (cd "$root/bin" && timeout 300 ./tools/pipeline_train \
        --config=configs/pipeline_spectrain.textproto --set=training.iterations=6 \
        --set=training.evaluate=false) >"$output" 2>&1; then
  fail "pipeline_train of the bundle failed"
else
  ok
fi

# --- the GPU check, as prepared, runs end to end with device cpu on what the bundle built -----
case_name=gpu_check
output="$TMP/check.out"
if ! timeout 900 "$PY" "$root/tools/gpu/check.py" --out="$TMP/check" --device=cpu --quick \
    >"$output" 2>&1; then
  fail "tools/gpu/check.py failed"
else
  for f in report.md check.csv; do
    [[ -s "$TMP/check/$f" ]] || fail "the check wrote no $f"
  done
  # Every section ran and measured; on the CPU only the targets meant for a GPU may fail.
  for section in a b c d e; do
    grep -q "^$section," "$TMP/check/check.csv" || fail "section $section has no rows"
  done
  if grep -E '^(a|b),' "$TMP/check/check.csv" | grep -q ',fail,'; then
    fail "a model comparison or an equivalence failed: $(grep -E '^(a|b),.*,fail,' "$TMP/check/check.csv")"
  fi
  grep -q '^d,.*,report,' "$TMP/check/check.csv" || fail "no pipeline run measured"
  ok
fi

finish_cases

