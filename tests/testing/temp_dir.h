// A fresh folder for one test case under Bazel's per-test temporary folder.
#ifndef P3_TESTS_TESTING_TEMP_DIR_H_
#define P3_TESTS_TESTING_TEMP_DIR_H_

#include <string>

namespace p3::testing {

// $TEST_TMPDIR/<name> (/tmp/<name> outside Bazel), emptied and created: each call gives
// an empty folder. Not for concurrent use of one name.
std::string FreshDir(const std::string& name);

}  // namespace p3::testing

#endif  // P3_TESTS_TESTING_TEMP_DIR_H_
