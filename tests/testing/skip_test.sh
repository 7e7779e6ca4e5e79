#!/usr/bin/env bash
# tests/testing/skip.sh: the line p3_skip prints (and adds to test.warnings) is the one
# .ci/run counts, and P3_TEST_SIMULATE_NOT_ROOT turns p3_is_root off. The lines under test
# are captured, never printed as they are: this test's own log must not read as a skip.
set -uo pipefail

source tests/testing/skip.sh

TMP="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$(TEST_WARNINGS_OUTPUT_FILE="$TMP/warnings" P3_TEST_SIMULATE_NOT_ROOT= p3_skip "ssh cases" "no sshd")
rc=$?
[[ $rc -eq 0 ]] || fail "p3_skip returned $rc"
[[ "$out" == "P3_SKIPPED: ssh cases: no sshd" ]] || fail "p3_skip printed '${out//P3_/p3_}'"
[[ "$(cat "$TMP/warnings" 2>/dev/null)" == "$out" ]] || fail "test.warnings does not hold the line"
# .ci/run's pattern.
grep -qE '^P3_SKIPPED: ' <<<"$out" || fail ".ci/run's pattern does not match the line"

out=$(TEST_WARNINGS_OUTPUT_FILE= P3_TEST_SIMULATE_NOT_ROOT=1 p3_skip "x" "y")
[[ "$out" == "P3_SKIPPED: x: y [P3_TEST_SIMULATE_NOT_ROOT is set]" ]] ||
  fail "a simulated skip does not say so: '${out//P3_/p3_}'"

if P3_TEST_SIMULATE_NOT_ROOT=1 p3_is_root; then fail "P3_TEST_SIMULATE_NOT_ROOT=1 left p3_is_root true"; fi
if [[ $(id -u) -eq 0 ]]; then
  (unset P3_TEST_SIMULATE_NOT_ROOT; p3_is_root) || fail "p3_is_root is false as root"
else
  (unset P3_TEST_SIMULATE_NOT_ROOT; p3_is_root) && fail "p3_is_root is true as $(id -un)"
fi

echo "$failures failures"
[[ $failures -eq 0 ]]
