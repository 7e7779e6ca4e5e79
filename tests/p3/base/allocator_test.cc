#include "p3/base/allocator.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/testing/skip.h"

namespace p3 {
namespace {

// kB of this process's anonymous memory in transparent huge pages.
long AnonHugePagesKb() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

// Run before main() in every process of this binary: in the child that the huge-page case
// below starts (P3_ALLOCATOR_TEST_HEAP_CHILD set), it tunes the allocator as p3_worker does,
// grows the heap by 64 MiB, touches it and exits: 1 if any of it is in huge pages, 0 if
// none, 3 if the tuning failed. Elsewhere it does nothing.
const bool kHeapChild = [] {
  if (std::getenv("P3_ALLOCATOR_TEST_HEAP_CHILD") == nullptr) return false;
  if (!TuneAllocatorForLargeMessages().ok()) _exit(3);
  constexpr size_t kBytes = 64 << 20;
  char* buffer = static_cast<char*>(std::malloc(kBytes));
  if (buffer == nullptr) _exit(3);
  std::memset(buffer, 1, kBytes);
  _exit(AnonHugePagesKb() > 0 ? 1 : 0);
}();

// Starts this test binary again with `tunables` as GLIBC_TUNABLES (null: unset) as the heap
// child above; returns its exit status.
int HeapChild(const char* tunables) {
  const pid_t child = fork();
  CATCH_REQUIRE(child >= 0);
  if (child == 0) {
    setenv("P3_ALLOCATOR_TEST_HEAP_CHILD", "1", 1);
    if (tunables != nullptr) {
      setenv("GLIBC_TUNABLES", tunables, 1);
    } else {
      unsetenv("GLIBC_TUNABLES");
    }
    char* const argv[] = {const_cast<char*>("allocator_test"), nullptr};
    execv("/proc/self/exe", argv);
    _exit(4);
  }
  int status = 0;
  CATCH_REQUIRE(waitpid(child, &status, 0) == child);
  CATCH_REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

CATCH_TEST_CASE("the huge-page tunable is added to GLIBC_TUNABLES, and a setting of it already there wins") {
  CATCH_CHECK(TunablesWithHugePageHeap(nullptr) == "glibc.malloc.hugetlb=1");
  CATCH_CHECK(TunablesWithHugePageHeap("") == "glibc.malloc.hugetlb=1");
  CATCH_CHECK(TunablesWithHugePageHeap("glibc.malloc.arena_max=2") ==
              "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  CATCH_CHECK(TunablesWithHugePageHeap("glibc.malloc.hugetlb=0") == "glibc.malloc.hugetlb=0");
  CATCH_CHECK(TunablesWithHugePageHeap("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2") ==
              "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2");
  // Only that exact name counts.
  CATCH_CHECK(TunablesWithHugePageHeap("glibc.malloc.hugetlbx=0") ==
              "glibc.malloc.hugetlbx=0:glibc.malloc.hugetlb=1");
}

CATCH_TEST_CASE("a process started after the request grows its heap in huge pages") {
  CATCH_REQUIRE_FALSE(kHeapChild);
  const char* saved = std::getenv("GLIBC_TUNABLES");
  const std::string restore = saved != nullptr ? saved : "";
  unsetenv("GLIBC_TUNABLES");
  CATCH_REQUIRE(RequestHugePageHeapForChildren().ok());
  const std::string requested = std::getenv("GLIBC_TUNABLES");
  CATCH_CHECK(requested == "glibc.malloc.hugetlb=1");
  if (saved != nullptr) {
    setenv("GLIBC_TUNABLES", restore.c_str(), 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }

  std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream mode;
  mode << mode_file.rdbuf();
  if (!mode_file || mode.str().find("[never]") != std::string::npos) {
    testing::ReportSkip("huge pages for the heap", "transparent huge pages are off in this kernel");
    return;
  }
  CATCH_CHECK(HeapChild(requested.c_str()) == 1);
  // Where the kernel gives huge pages only when asked ([madvise]), none without the tunable.
  if (mode.str().find("[madvise]") != std::string::npos) {
    CATCH_CHECK(HeapChild("glibc.malloc.hugetlb=0") == 0);
    CATCH_CHECK(HeapChild(nullptr) == 0);
  }
}

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates `bytes`, writes every byte, frees it; returns the page faults this took.
long FaultsForOneUse(size_t bytes) {
  const long before = MinorFaults();
  char* buffer = static_cast<char*>(std::malloc(bytes));
  CATCH_REQUIRE(buffer != nullptr);
  std::memset(buffer, 1, bytes);
  // Keep the writes from being optimised away together with the buffer.
  volatile char sink = buffer[bytes - 1];
  (void)sink;
  std::free(buffer);
  return MinorFaults() - before;
}

CATCH_TEST_CASE("after tuning, a freed large buffer is used again without page faults") {
  constexpr size_t kBytes = 64 << 20;  // 16,384 pages of 4 KiB
  // Untuned glibc maps a buffer this large afresh on every malloc: every use faults.
  CATCH_REQUIRE(FaultsForOneUse(kBytes) > 1000);
  CATCH_REQUIRE(FaultsForOneUse(kBytes) > 1000);

  CATCH_REQUIRE(TuneAllocatorForLargeMessages().ok());
  FaultsForOneUse(kBytes);  // the first use after tuning grows the heap: faults once
  const long again = FaultsForOneUse(kBytes);
  CATCH_CHECK(again < 100);
}

long ThreadMinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// In a child process (the allocator settings are process-wide and cannot be undone):
// tunes the allocator; then one thread fills and frees a buffer and, while it is still
// alive (its arena its own), a second thread fills one of the same size. Returns the
// second thread's page faults, at most 254 (the child's exit status).
int SecondThreadFaults(const AllocatorOptions& options) {
  const pid_t child = fork();
  CATCH_REQUIRE(child >= 0);
  if (child == 0) {
    if (!TuneAllocatorForLargeMessages(options).ok()) _exit(255);
    constexpr size_t kBytes = 32 << 20;  // below the 64 MiB of a thread arena's heap
    std::atomic<bool> freed{false};
    std::atomic<bool> done{false};
    long faults = 0;
    std::thread first([&] {
      char* buffer = static_cast<char*>(std::malloc(kBytes));
      std::memset(buffer, 1, kBytes);
      std::free(buffer);
      freed = true;
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    std::thread second([&] {
      while (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const long before = ThreadMinorFaults();
      char* buffer = static_cast<char*>(std::malloc(kBytes));
      std::memset(buffer, 2, kBytes);
      volatile char sink = buffer[kBytes - 1];
      (void)sink;
      faults = ThreadMinorFaults() - before;
      std::free(buffer);
      done = true;
    });
    second.join();
    first.join();
    _exit(faults > 254 ? 254 : static_cast<int>(faults));
  }
  int status = 0;
  CATCH_REQUIRE(waitpid(child, &status, 0) == child);
  CATCH_REQUIRE(WIFEXITED(status));
  CATCH_REQUIRE(WEXITSTATUS(status) != 255);
  return WEXITSTATUS(status);
}

CATCH_TEST_CASE("with one arena, a buffer one thread freed is used again by another without page faults") {
  // 32 MiB is 8,192 pages: a thread that gets fresh memory faults thousands of times.
  CATCH_CHECK(SecondThreadFaults({.one_arena = false}) == 254);
  CATCH_CHECK(SecondThreadFaults({.one_arena = true}) < 100);
}

}  // namespace
}  // namespace p3
