// What the stand-ins for p3_server and p3_worker (fake_p3_server.cc, fake_p3_worker.cc)
// share: reading their command-line contract without absl's flag registry, and the clock
// of their trace events.
#ifndef P3_TESTS_TOOLS_FAKE_COMMON_H_
#define P3_TESTS_TOOLS_FAKE_COMMON_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"

namespace p3::fake {

// The value of "--<name>=value" in argv, or "" when absent.
inline std::string FlagValue(int argc, char** argv, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (absl::StartsWith(argv[i], prefix)) return argv[i] + prefix.size();
  }
  return "";
}

// Microseconds since the Unix epoch (the `ts` of Chrome trace events).
inline int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace p3::fake

#endif  // P3_TESTS_TOOLS_FAKE_COMMON_H_
