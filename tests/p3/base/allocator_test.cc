#include "p3/base/allocator.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

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
