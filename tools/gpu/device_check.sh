#!/usr/bin/env bash
# The GPU check on the borrowed GPU machine, in two commands of under 10 minutes each (the
# device tool's limit), from the repository root of the copy of the working tree that
# travels there (docs/results/gpu/gpu_check.md):
#
#   here:   tools/gpu/make_bundle.sh --out=out/gpu/p3-bundle.tar.gz   # ~15 MB, travels along
#   there:  bash tools/gpu/device_check.sh build            # unpack and build: ~3 min on 16 cores
#           bash tools/gpu/device_check.sh check "$OUT"     # the check: report.md + check.csv
#
# `build` unpacks out/gpu/p3-bundle.tar.gz into out/gpu/ and builds it with the local g++ and
# PyTorch's libtorch (tools/gpu/build.sh); `check` runs tools/gpu/check.py on what it built,
# device cuda, writing into the folder given (default out/gpu/check). Extra arguments go to
# check.py (e.g. --sections=ab).
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-}
shift || true
root=out/gpu/p3-bundle
case "$what" in
  build)
    [ -f out/gpu/p3-bundle.tar.gz ] ||
      { echo "device_check.sh: no out/gpu/p3-bundle.tar.gz (tools/gpu/make_bundle.sh)" >&2; exit 2; }
    rm -rf "$root"
    tar xzf out/gpu/p3-bundle.tar.gz -C out/gpu
    "$root/tools/gpu/build.sh" --jobs="$(nproc)" "$@"
    ;;
  check)
    out=${1:-out/gpu/check}
    shift || true
    [ -x "$root/bin/tools/launch_cluster" ] ||
      { echo "device_check.sh: nothing built in $root (run: device_check.sh build)" >&2; exit 2; }
    py=python3
    "$py" "$root/tools/gpu/check.py" --out="$out" --device=cuda "$@"
    ;;
  *)
    echo "usage: tools/gpu/device_check.sh build | check [OUT] [check.py flags]" >&2
    exit 2
    ;;
esac
