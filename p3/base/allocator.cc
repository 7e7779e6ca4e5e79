#include "p3/base/allocator.h"

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

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

std::string TunablesWithHugePageHeap(const char* current) {
  constexpr absl::string_view kName = "glibc.malloc.hugetlb";
  const std::string value = current != nullptr ? current : "";
  for (absl::string_view tunable : absl::StrSplit(value, ':')) {
    if (absl::StartsWith(tunable, kName) && absl::StartsWith(tunable.substr(kName.size()), "=")) {
      return value;
    }
  }
  const std::string setting = std::string(kName) + "=1";
  return value.empty() ? setting : value + ":" + setting;
}

absl::Status RequestHugePageHeapForChildren() {
  const std::string value = TunablesWithHugePageHeap(std::getenv("GLIBC_TUNABLES"));
  if (setenv("GLIBC_TUNABLES", value.c_str(), /*overwrite=*/1) != 0) {
    return absl::InternalError("setenv(GLIBC_TUNABLES) failed");
  }
  return absl::OkStatus();
}

}  // namespace p3
