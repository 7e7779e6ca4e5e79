#include "p3/allocator.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

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

}  // namespace
}  // namespace p3
