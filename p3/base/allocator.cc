#include "p3/base/allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace p3 {

absl::Status TuneAllocatorForLargeMessages(const AllocatorOptions& options) {
#if defined(__GLIBC__)
  // Threads other than the main one allocate from arenas of at most 64 MiB; a request
  // larger than that is still mapped (glibc falls back to mmap), but those are few.
  constexpr int kTrimThreshold = 1 << 30;
  if (mallopt(M_MMAP_MAX, 0) != 1) {
    return absl::InternalError("mallopt(M_MMAP_MAX) was refused");
  }
  if (mallopt(M_TRIM_THRESHOLD, kTrimThreshold) != 1) {
    return absl::InternalError("mallopt(M_TRIM_THRESHOLD) was refused");
  }
  if (options.one_arena && mallopt(M_ARENA_MAX, 1) != 1) {
    return absl::InternalError("mallopt(M_ARENA_MAX) was refused");
  }
  return absl::OkStatus();
#else
  (void)options;
  return absl::UnimplementedError("allocator tuning needs glibc");
#endif
}

}  // namespace p3
