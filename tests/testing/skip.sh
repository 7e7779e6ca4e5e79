# Shared by the shell tests: report a case that did not run, so that it shows as skipped.
#
# A target that needs root or sshd as a whole declares it (target_compatible_with, see
# third_party/host_facts.bzl) and `bazel test` lists it as SKIPPED where the machine lacks
# it. This is for a case a test can only find out about at run time. Bazel 4.2.3 has no
# "skipped" status for that: a test that returns 0 is PASSED, and the file
# $TEST_WARNINGS_OUTPUT_FILE it offers is kept in bazel-testlogs but never printed. So a
# skip is one line in the test's log,
#   P3_SKIPPED: <what>: <reason>
# which .ci/run looks for in every PASSED test's test.log: such a test counts as skipped,
# not passed, and the line is printed under bazel's summary. (The line also goes to
# test.warnings, Bazel's own channel for such notes.)
#
# Usage, from a test run at its runfiles root:
#   source tests/testing/skip.sh
#   if ! p3_is_root; then p3_skip "ssh cases" "need root"; fi

# p3_skip WHAT REASON: WHAT did not run, because of REASON. Returns 0.
p3_skip() {
  local line="P3_SKIPPED: $1: $2"
  if [[ -n "${P3_TEST_SIMULATE_NOT_ROOT:-}" ]]; then
    line+=" [P3_TEST_SIMULATE_NOT_ROOT is set]"
  fi
  echo "$line"
  if [[ -n "${TEST_WARNINGS_OUTPUT_FILE:-}" ]]; then
    echo "$line" >>"$TEST_WARNINGS_OUTPUT_FILE" 2>/dev/null
  fi
  return 0
}

# p3_is_root: true when running as root. Only to check that the skips are reported,
# P3_TEST_SIMULATE_NOT_ROOT=1 makes it false, e.g.
#   bazel test --test_env=P3_TEST_SIMULATE_NOT_ROOT=1 //tests/tools:multihost_launch_test
p3_is_root() {
  [[ -z "${P3_TEST_SIMULATE_NOT_ROOT:-}" && $(id -u) -eq 0 ]]
}
