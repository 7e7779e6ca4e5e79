#!/usr/bin/env bash
# Prepares what the GPU machine builds from (docs/building.md, "Building on a machine
# without Bazel"): one .tar.gz with the sources the targets' compile actions read, the
# protobuf/gRPC code generated here (it must match the carried protobuf 3.21.12), the
# Debian .debs of tools/gpu/debs.txt, and manifest.json, the compile and link commands of
# `"${bazel[@]}" aquery -c opt` (tools/gpu/commands.py). On the other machine:
#   tar xzf p3-bundle.tar.gz && p3-bundle/tools/gpu/build.sh
#
#   tools/gpu/make_bundle.sh [--out=FILE] [--debs=DIR] [TARGET...]
# Default targets: tools/gpu/targets.txt. --debs: take the .debs from DIR instead of
# `apt-get download` (which needs the apt lists of `apt-get update`).
# Run from the repository root, with bazel on PATH (or BAZEL="bazel --output_user_root=..."
# for a Bazel server of its own, as the test does). Fails above 48 MiB.
set -euo pipefail
read -r -a bazel <<<"${BAZEL:-bazel}"

out=p3-bundle.tar.gz
debs_from=""
targets=()
for arg in "$@"; do
  case "$arg" in
    --out=*) out=${arg#--out=} ;;
    --debs=*) debs_from=${arg#--debs=} ;;
    --*) echo "make_bundle.sh: unknown flag $arg" >&2; exit 2 ;;
    *) targets+=("$arg") ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(grep -v '^#' tools/gpu/targets.txt | grep .)
fi
[ -f WORKSPACE ] || { echo "make_bundle.sh: run it from the repository root" >&2; exit 2; }
limit=$((48 * 1024 * 1024))

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage="$work/p3-bundle"
mkdir -p "$stage/debs"

# A stand-in libtorch folder: the aquery then writes libtorch's include paths, -L, rpath
# and libraries (CUDA ones included) as for an external libtorch, under a name that
# commands.py replaces with the real folder.
ph="$work/libtorch-placeholder"
mkdir -p "$ph/include/torch/csrc/api/include/torch" "$ph/include/ATen" "$ph/include/c10" "$ph/lib"
for lib in torch torch_cpu c10 torch_cuda c10_cuda; do : >"$ph/lib/lib$lib.so"; done

echo "make_bundle.sh: generating the protobuf and gRPC code, and the build stamp" >&2
# --symlink_prefix=/: no bazel-* links are made, so a nested Bazel (the test) leaves the
# workspace's own links alone.
# //p3/base:build_commit_cc is generated too (the commit a binary reports; stamped, as the
# streaming benchmark's records want).
"${bazel[@]}" build -c opt --config=stamp --symlink_prefix=/ //proto:p3_proto_gen \
  //proto:config_proto_gen //p3/base:build_commit_cc >&2
query=$(printf ' + deps(%s)' "${targets[@]}")
query="mnemonic(\"CppCompile|CppLink\", ${query# + })"
echo "make_bundle.sh: bazel aquery for ${#targets[@]} targets" >&2
"${bazel[@]}" aquery -c opt --repo_env=P3_LIBTORCH="$ph" "$query" --output=jsonproto \
  --include_param_files >"$work/aquery.json"
python3 tools/gpu/commands.py manifest --aquery="$work/aquery.json" --torch_placeholder="$ph" \
  --out="$stage/manifest.json" >&2

output_base=$("${bazel[@]}" info output_base 2>/dev/null)
execution_root=$("${bazel[@]}" info execution_root 2>/dev/null)
python3 - "$stage/manifest.json" "$stage" "$output_base" "$execution_root" <<'PY'
import json, os, shutil, sys
manifest, stage, output_base, execution_root = sys.argv[1:]
m = json.load(open(manifest))
for f in m["sources"] + m["generated"]:
    src = os.path.join(output_base, f) if f.startswith("external/") else f
    if f.startswith("bazel-out/"):
        src = os.path.join(execution_root, f)
    dst = os.path.join(stage, f)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(src, dst)
    # The generated .cc's header is read too.
    if f.endswith(".pb.cc"):
        shutil.copy2(src[:-3] + ".h", dst[:-3] + ".h")
PY
# The headers: aquery names them through middlemen, so every header of the repository
# goes (they are small), and the runfiles library's from Bazel's tools.
git ls-files '*.h' | grep -v '^worker/examples/' | while read -r h; do
  mkdir -p "$stage/$(dirname "$h")" && cp "$h" "$stage/$h"
done
mkdir -p "$stage/external/bazel_tools/tools/cpp/runfiles"
cp "$output_base/external/bazel_tools/tools/cpp/runfiles/runfiles.h" \
  "$stage/external/bazel_tools/tools/cpp/runfiles/"
# What the binaries read at run time and the scripts that run there.
cp -r configs "$stage/"
mkdir -p "$stage/tools/gpu"
cp tools/gpu/*.sh tools/gpu/*.py tools/gpu/*.txt tools/gpu/*.csv "$stage/tools/gpu/"

if [ -n "$debs_from" ]; then
  while read -r p; do
    cp "$debs_from"/"${p}"_*.deb "$stage/debs/"
  done < <(grep -v '^#' tools/gpu/debs.txt | grep .)
else
  (cd "$stage/debs" && grep -v '^#' "$OLDPWD/tools/gpu/debs.txt" | grep . |
     xargs apt-get download -q >&2)
fi
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  printf 'target %s\n' "${targets[@]}"
} >"$stage/BUNDLE.txt"

tar czf "$out" -C "$work" p3-bundle
size=$(stat -c %s "$out")
echo "make_bundle.sh: $out, $((size / 1024)) KiB ($(find "$stage" -type f | wc -l) files)" >&2
if [ "$size" -gt "$limit" ]; then
  echo "make_bundle.sh: $out is over 48 MiB" >&2
  exit 1
fi
