#!/usr/bin/env bash
# Builds the bundle of tools/gpu/make_bundle.sh on a machine without Bazel: the local g++,
# PyTorch's libtorch (or P3_LIBTORCH), and the carried Debian .debs unpacked into a private
# prefix (P3_DEPS, default /tmp/p3-deps; never /). Run it from anywhere:
#   p3-bundle/tools/gpu/build.sh [--jobs=N] [--opt=-O0] [--only=//server:p3_server,...]
# The binaries land in p3-bundle/bin/ (bin/server/p3_server, bin/worker/p3_worker,
# bin/tools/launch_cluster, ...), which also holds configs/: launch_cluster run from there
# finds the others by their default paths. Their RPATH names libtorch's and the prefix's
# lib folders, so they run without LD_LIBRARY_PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
torch=${P3_LIBTORCH:-$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')}
deps=${P3_DEPS:-/tmp/p3-deps}
mkdir -p "$deps"
for deb in "$root"/debs/*.deb; do dpkg -x "$deb" "$deps"; done
echo "build.sh: libtorch $torch; Debian libraries in $deps" >&2
"$py" "$root/tools/gpu/commands.py" build --manifest="$root/manifest.json" --root="$root" \
  --torch="$torch" --deps="$deps" "$@"
mkdir -p "$root/bin"
"$py" - "$root" <<'PY'
import json, os, shutil, sys
root = sys.argv[1]
for link in json.load(open(os.path.join(root, "manifest.json")))["links"]:
    built = os.path.join(root, link["out"])
    if not os.path.exists(built):
        continue  # not asked for (--only)
    pkg, _, name = link["target"].lstrip("/").partition(":")
    dst = os.path.join(root, "bin", pkg, name)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(built, dst)
PY
ln -sfn "$root/configs" "$root/bin/configs"
echo "build.sh: binaries in $root/bin" >&2
