// Counts every allocation through operator new in the process, for the tests and
// benchmarks that prove a hot path allocates nothing (the server's per-gradient path, the
// wire codec). Linking //p3/base:allocation_count replaces the global operator new and
// delete (malloc and free underneath, plus one relaxed atomic increment per new): link it
// into test and benchmark binaries only, never into a library.
//
// Example:
//   const int64_t before = p3::AllocationCount();
//   shard.Gradient(...);
//   CATCH_CHECK(p3::AllocationCount() - before == 0);
//
// Thread-safe.
#ifndef P3_P3_BASE_ALLOCATION_COUNT_H_
#define P3_P3_BASE_ALLOCATION_COUNT_H_

#include <cstdint>

namespace p3 {

// Calls of operator new (any form) in this process so far.
int64_t AllocationCount();

}  // namespace p3

#endif  // P3_P3_BASE_ALLOCATION_COUNT_H_
