#include "tests/testing/skip.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace p3::testing {

void ReportSkip(std::string_view what, std::string_view reason) {
  std::string line = "P3_SKIPPED: ";
  line.append(what).append(": ").append(reason);
  if (const char* simulate = std::getenv("P3_TEST_SIMULATE_NOT_ROOT");
      simulate != nullptr && *simulate != '\0') {
    line += " [P3_TEST_SIMULATE_NOT_ROOT is set]";
  }
  line += "\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
  if (const char* warnings = std::getenv("TEST_WARNINGS_OUTPUT_FILE"); warnings != nullptr) {
    if (FILE* file = std::fopen(warnings, "a"); file != nullptr) {
      std::fputs(line.c_str(), file);
      std::fclose(file);
    }
  }
}

bool IsRoot() {
  const char* simulate = std::getenv("P3_TEST_SIMULATE_NOT_ROOT");
  return (simulate == nullptr || *simulate == '\0') && geteuid() == 0;
}

}  // namespace p3::testing
