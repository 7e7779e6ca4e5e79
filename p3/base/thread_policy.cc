#include "p3/base/thread_policy.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace p3 {

absl::Status ScheduleThisThreadAsBatch() {
#ifdef SCHED_BATCH
  sched_param param{};
  param.sched_priority = 0;
  // On Linux, pid 0 is the calling thread, not the whole process.
  if (sched_setscheduler(0, SCHED_BATCH, &param) != 0) {
    return absl::InternalError(
        absl::StrCat("sched_setscheduler(SCHED_BATCH): ", std::strerror(errno)));
  }
  return absl::OkStatus();
#else
  return absl::UnimplementedError("this system has no SCHED_BATCH");
#endif
}

bool ThisThreadIsBatch() {
#ifdef SCHED_BATCH
  return sched_getscheduler(0) == SCHED_BATCH;
#else
  return false;
#endif
}

}  // namespace p3
