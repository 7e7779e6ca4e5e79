#!/usr/bin/env bash
# The layering of docs/design.md holds: no package depends on a package of a higher
# layer (BUILD deps and #includes), and the graph drawn in docs/design.md is the one the
# BUILD files give (tools/package_graph.py --check). Also checks that the checker can
# fail: a throwaway tree with an upward #include and one with an upward BUILD dep.
#
# "local" (not sandboxed): it reads the whole source tree, which it finds by following
# the runfiles link of the script to the workspace.
set -uo pipefail

script=$(readlink -f tools/package_graph.py)
root=$(dirname "$(dirname "$script")")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

if ! out=$(cd "$root" && python3 tools/package_graph.py --check 2>&1); then
  fail "the repository's layering or its picture in docs/design.md:"
  echo "$out"
else
  echo "$out" | tail -1
fi

# A tree whose core (p3/core) includes a tool, and whose worker depends on the server.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/p3/core" "$tmp/tools" "$tmp/worker" "$tmp/server" "$tmp/docs"
printf 'cc_library(name = "a", srcs = ["a.cc"])\n' >"$tmp/p3/core/BUILD"
printf '#include "tools/x.h"\n' >"$tmp/p3/core/a.cc"
printf 'cc_library(name = "x")\n' >"$tmp/tools/BUILD"
printf 'cc_library(name = "w", deps = ["//server:s"])\n' >"$tmp/worker/BUILD"
printf 'cc_library(name = "s", visibility = ["//worker:__pkg__"])\n' >"$tmp/server/BUILD"
printf '%s\n%s\n' '<!-- package-graph:begin (tools/package_graph.py --write) -->' \
  '<!-- package-graph:end -->' >"$tmp/docs/design.md"
out=$(python3 "$script" --root="$tmp" --check 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "an upward tree passed the check (exit $rc)"
grep -q 'p3/core/a.cc: p3/core -> tools runs up' <<<"$out" || fail "the upward #include was not named: $out"
grep -q 'BUILD: worker -> server runs sideways' <<<"$out" || fail "worker -> server not named: $out"
grep -q 'out of date' <<<"$out" || fail "a stale picture was not reported: $out"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
