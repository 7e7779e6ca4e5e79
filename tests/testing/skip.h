// Reporting a test case that did not run, so that it shows as skipped (the C++ side of
// tests/testing/skip.sh; the same line, the same rules).
//
// A target that needs root or sshd as a whole declares it (target_compatible_with, see
// third_party/host_facts.bzl) and `bazel test` lists it as SKIPPED where the machine lacks
// it. This is for a case a test can only find out about at run time: Catch2 2.13 has no
// SKIP, and Bazel 4.2.3 no "skipped" status for it, so a case that returns early passes. So a skip is one line in the test's log,
//   P3_SKIPPED: <what>: <reason>
// which .ci/run looks for in every PASSED test's test.log: such a test counts as skipped,
// not passed. The line also goes to $TEST_WARNINGS_OUTPUT_FILE (Bazel's test.warnings).
//
// Example:
//   if (!p3::testing::IsRoot()) {
//     p3::testing::ReportSkip("the real-network case", "not root");
//     return;
//   }
#ifndef P3_TESTS_TESTING_SKIP_H_
#define P3_TESTS_TESTING_SKIP_H_

#include <string_view>

namespace p3::testing {

// `what` did not run because of `reason`: prints the P3_SKIPPED line to stdout (flushed).
void ReportSkip(std::string_view what, std::string_view reason);

// True when running as root. Only to check that skips are reported,
// P3_TEST_SIMULATE_NOT_ROOT=1 in the environment makes it false
// (bazel test --test_env=P3_TEST_SIMULATE_NOT_ROOT=1 ...).
bool IsRoot();

}  // namespace p3::testing

#endif  // P3_TESTS_TESTING_SKIP_H_
