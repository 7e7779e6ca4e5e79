// What the config tests share: the error message a config text and its overrides give.
//
// Example:
//   CATCH_CHECK(ErrorOf("cluster { workers: -1 }") ==
//               "cluster.workers: -1 is out of range; allowed 1..64");
//   CATCH_CHECK(ErrorOf("", {"network.bandwidth_gbps=1"}) == "(no error)");
#ifndef P3_TESTS_PROTO_CONFIG_TEST_UTIL_H_
#define P3_TESTS_PROTO_CONFIG_TEST_UTIL_H_

#include <string>
#include <vector>

namespace p3::config {

// The message of ParseConfig(text, overrides)'s error, whose code a Catch2 check requires
// to be InvalidArgument; "(no error)" when the config is valid.
std::string ErrorOf(const std::string& text, const std::vector<std::string>& overrides = {});

}  // namespace p3::config

#endif  // P3_TESTS_PROTO_CONFIG_TEST_UTIL_H_
