#include "p3/base/thread_policy.h"

#include <thread>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

CATCH_TEST_CASE("a thread put in SCHED_BATCH is in it, and so are the threads it starts next") {
  CATCH_REQUIRE_FALSE(ThisThreadIsBatch());  // the test runs in the default policy
  bool before = true, after = false, child = false;
  absl::Status status;
  std::thread t([&] {
    before = ThisThreadIsBatch();
    status = ScheduleThisThreadAsBatch();
    after = ThisThreadIsBatch();
    std::thread c([&] { child = ThisThreadIsBatch(); });
    c.join();
  });
  t.join();
  CATCH_CHECK(status.ok());
  CATCH_CHECK_FALSE(before);
  CATCH_CHECK(after);
  CATCH_CHECK(child);
  // Only the calling thread changed: this one, which started it, did not.
  CATCH_CHECK_FALSE(ThisThreadIsBatch());
}

}  // namespace
}  // namespace p3
