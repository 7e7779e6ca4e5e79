// tools/proc_stats.h: the parsers on recorded /proc texts (a command name with spaces and
// parentheses, lines missing), and the readers on this process: a thread that blocks
// adds voluntary switches, CPU time burnt shows in the process's utime + stime.
#include "tools/proc_stats.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

namespace p3::tools {
namespace {

CATCH_TEST_CASE("stat text: utime + stime after a command name holding spaces and ')'") {
  // Fields 3.. of a real /proc/<pid>/stat line; utime (14) 1234, stime (15) 56.
  const std::string text =
      "4242 (p3 (send) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 1234 56 0 0 20 0 9 0 "
      "1000 100000 200 18446744073709551615\n";
  absl::StatusOr<int64_t> ticks = ParseStatCpuTicks(text);
  CATCH_REQUIRE(ticks.ok());
  CATCH_CHECK(*ticks == 1234 + 56);
}

CATCH_TEST_CASE("stat text without a command or with too few fields is refused") {
  CATCH_CHECK(!ParseStatCpuTicks("4242 S 1 2 3").ok());
  CATCH_CHECK(!ParseStatCpuTicks("4242 (x) S 1 2 3").ok());
}

CATCH_TEST_CASE("status text: the two context-switch counts, each from its own line") {
  const std::string text =
      "Name:\tp3-recv-w0\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t815\n"
      "nonvoluntary_ctxt_switches:\t12\n";
  absl::StatusOr<ContextSwitches> sw = ParseStatusSwitches(text);
  CATCH_REQUIRE(sw.ok());
  CATCH_CHECK(sw->voluntary == 815);
  CATCH_CHECK(sw->involuntary == 12);
  CATCH_CHECK(sw->threads == 1);
}

CATCH_TEST_CASE("status text missing a count, or with a malformed one, names it") {
  absl::StatusOr<ContextSwitches> no_involuntary =
      ParseStatusSwitches("Name:\tx\nvoluntary_ctxt_switches:\t3\n");
  CATCH_REQUIRE(!no_involuntary.ok());
  CATCH_CHECK(std::string(no_involuntary.status().message()).find("nonvoluntary") !=
              std::string::npos);
  CATCH_CHECK(!ParseStatusSwitches("voluntary_ctxt_switches:\tmany\n"
                                   "nonvoluntary_ctxt_switches:\t1\n")
                   .ok());
}

CATCH_TEST_CASE("a thread that sleeps 20 times adds at least 20 voluntary switches") {
  absl::StatusOr<ContextSwitches> before = ThreadContextSwitches(getpid());
  CATCH_REQUIRE(before.ok());
  // The new thread reads the counts itself before it ends: an ended thread's counts leave
  // the sum.
  absl::StatusOr<ContextSwitches> during;
  std::thread sleeper([&] {
    for (int i = 0; i < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    during = ThreadContextSwitches(getpid());
  });
  sleeper.join();
  CATCH_REQUIRE(during.ok());
  CATCH_CHECK(during->threads >= 2);
  CATCH_CHECK(during->voluntary - before->voluntary >= 20);
  CATCH_CHECK(!ThreadContextSwitches(-1).ok());
}

CATCH_TEST_CASE("CPU time burnt in this process shows in its utime + stime") {
  absl::StatusOr<double> before = ProcessCpuSeconds(getpid());
  CATCH_REQUIRE(before.ok());
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  absl::StatusOr<double> after = ProcessCpuSeconds(getpid());
  CATCH_REQUIRE(after.ok());
  // 300 ms of wall time on a core of our own, counted in 10 ms ticks; on a busy machine
  // the thread may get less of a core: at least a tenth.
  CATCH_CHECK(*after - *before >= 0.03);
  CATCH_CHECK(!ProcessCpuSeconds(-1).ok());
}

CATCH_TEST_CASE("this process's and this thread's CPU seconds grow with work; the load average is read") {
  const double self0 = SelfCpuSeconds(), thread0 = ThreadCpuSeconds();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  const double thread_used = ThreadCpuSeconds() - thread0;
  CATCH_CHECK(thread_used > 0.005);  // at least a twentieth of the 100 ms on a busy machine
  CATCH_CHECK(SelfCpuSeconds() - self0 >= thread_used - 0.002);  // rusage: microseconds
  CATCH_CHECK(Load1() >= 0);
}

}  // namespace
}  // namespace p3::tools
