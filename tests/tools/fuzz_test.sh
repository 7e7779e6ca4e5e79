#!/usr/bin/env bash
# tools/fuzz.sh without clang or a build: `check` finds every source its targets compile
# (it names them itself, outside Bazel, so a moved file must be renamed there too) and
# fails naming one that is missing; an unknown target is refused before anything is built.
#
# Reads the whole source tree, found by following the runfiles link of the script to the
# workspace: "local" (not sandboxed) and "external" (never cached: the sources it checks
# are not its declared inputs).
set -uo pipefail

source tests/testing/cases.sh

script=$(readlink -f tools/fuzz.sh)
root=$(dirname "$(dirname "$script")")
TMP="${TEST_TMPDIR:-$(mktemp -d)}"

case_name="check: every target's sources exist in the repository"
output="$TMP/check.out"
bash "$script" check >"$output" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  fail "exit status $rc"
elif ! grep -q "every target's sources exist" "$output"; then
  fail "no verdict"
else
  ok
fi

case_name="check: a missing source is named"
output="$TMP/missing.out"
copy="$TMP/tree"
mkdir -p "$copy/tools"
cp "$script" "$copy/tools/fuzz.sh"
(cd "$root" && cp --parents proto/wire_codec.cc tests/fuzz/wire_codec_fuzz.cc "$copy/")
bash "$copy/tools/fuzz.sh" check >"$output" 2>&1
rc=$?
if [[ $rc -ne 1 ]]; then
  fail "exit status $rc, expected 1"
elif ! grep -q "fuzz.sh: shard: server/message_handler.cc does not exist" "$output" ||
  grep -q "wire_codec: proto/wire_codec.cc" "$output"; then
  fail "the missing sources are not the ones named"
else
  ok
fi

case_name="an unknown target: exit 2 with the allowed ones, nothing built"
output="$TMP/unknown.out"
PATH="/nonexistent" /bin/bash "$copy/tools/fuzz.sh" nope >"$output" 2>&1
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q "allowed: shard, config, wire_codec" "$output"; then
  fail "exit status $rc, expected 2 naming the targets"
else
  ok
fi

finish_cases
