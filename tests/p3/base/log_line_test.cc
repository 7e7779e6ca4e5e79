#include "p3/base/log_line.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

CATCH_TEST_CASE("lines that several threads log at once come out whole") {
  // stderr into a file for the duration of the test.
  char path[] = "/tmp/log_line_test_XXXXXX";
  const int file = mkstemp(path);
  CATCH_REQUIRE(file >= 0);
  const int saved = dup(STDERR_FILENO);
  CATCH_REQUIRE(dup2(file, STDERR_FILENO) >= 0);
  constexpr int kThreads = 8;
  constexpr int kLines = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      // Long enough (about 200 bytes) that piecewise writes would interleave.
      for (int i = 0; i < kLines; ++i) {
        LogLine(absl::StrCat("[stall] thread ", t, " line ", i, ": ", std::string(180, 'a' + t)));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(file);

  std::ifstream in(path);
  std::map<int, int> lines_per_thread;
  std::string line;
  int bad = 0;
  while (std::getline(in, line)) {
    int t = -1, i = -1;
    char rest[256] = {0};
    if (std::sscanf(line.c_str(), "[stall] thread %d line %d: %255s", &t, &i, rest) == 3 &&
        t >= 0 && t < kThreads && std::string(rest) == std::string(180, 'a' + t)) {
      ++lines_per_thread[t];
    } else {
      ++bad;
    }
  }
  unlink(path);
  CATCH_CHECK(bad == 0);
  CATCH_REQUIRE(lines_per_thread.size() == kThreads);
  for (const auto& [t, count] : lines_per_thread) CATCH_CHECK(count == kLines);
}

}  // namespace
}  // namespace p3
