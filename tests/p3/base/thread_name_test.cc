#include "p3/base/thread_name.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <sys/syscall.h>
#include <thread>

namespace p3 {
namespace {

// What the kernel shows for the calling thread, read where perf and ps read it.
std::string KernelComm() {
  std::ifstream in("/proc/self/task/" + std::to_string(syscall(SYS_gettid)) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

CATCH_TEST_CASE("a thread's name shows in /proc, and only for that thread") {
  const std::string main_name = ThisThreadName();
  std::string seen;
  std::thread t([&seen] {
    CATCH_CHECK(NameThisThread("p3-send-s0"));
    seen = KernelComm();
  });
  t.join();
  CATCH_CHECK(seen == "p3-send-s0");
  CATCH_CHECK(ThisThreadName() == main_name);
}

CATCH_TEST_CASE("a name longer than the kernel keeps is cut at 15 bytes, not refused") {
  std::string seen;
  std::thread t([&seen] {
    CATCH_CHECK(NameThisThread("p3-a-name-much-longer-than-fifteen"));
    seen = ThisThreadName();
  });
  t.join();
  CATCH_CHECK(seen == "p3-a-name-much-");
  CATCH_CHECK(seen.size() == kMaxThreadNameBytes);
}

}  // namespace
}  // namespace p3
