#include "p3/core/version_tracker.h"

#include <thread>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

CATCH_TEST_CASE("waiting for a block returns once all its slices reach the version") {
  VersionTracker t(4);
  t.MarkArrived(0, 0);
  t.MarkArrived(1, 0);
  CATCH_CHECK(t.WaitFor(0, 2, 0, absl::InfiniteFuture()).ok());
  CATCH_CHECK(t.Missing(0, 4, 0) == 2);
  std::thread receiver([&] {
    t.AwaitWaiters(1);  // The slices arrive while the main thread waits for them.
    t.MarkArrived(2, 0);
    t.MarkArrived(3, 1);
  });
  CATCH_CHECK(t.WaitFor(2, 4, 0, absl::InfiniteFuture()).ok());
  receiver.join();
  CATCH_CHECK(t.Missing(0, 4, 1) == 3);
}

CATCH_TEST_CASE("a slice that never arrives gives DeadlineExceeded, not a hang") {
  VersionTracker t(2);
  t.MarkArrived(0, 3);
  absl::Status s = t.WaitFor(0, 2, 3, absl::Now() + absl::Milliseconds(1));
  CATCH_CHECK(absl::IsDeadlineExceeded(s));
  CATCH_CHECK(s.message().find("slice 1") != std::string::npos);
}

CATCH_TEST_CASE("abort wakes waiters with the abort status") {
  VersionTracker t(1);
  std::thread killer([&] {
    t.AwaitWaiters(1);  // The main thread is blocked in WaitFor(): Abort() must wake it.
    t.Abort(absl::UnavailableError("server 1 is gone"));
  });
  absl::Status s = t.WaitFor(0, 1, 0, absl::InfiniteFuture());
  killer.join();
  CATCH_CHECK(absl::IsUnavailable(s));
  CATCH_CHECK(t.waiters() == 0);
  t.Abort(absl::InternalError("second"));  // the first wins
  CATCH_CHECK(absl::IsUnavailable(t.WaitFor(0, 1, 0, absl::InfiniteFuture())));
}

CATCH_TEST_CASE("versions never go back") {
  VersionTracker t(1);
  t.MarkArrived(0, 5);
  t.MarkArrived(0, 2);
  CATCH_CHECK(t.Missing(0, 1, 5) == 0);
  CATCH_CHECK(t.Version(0) == 5u);
}

CATCH_TEST_CASE("a slice's version is none until it arrives, and a reset sets every slice's") {
  VersionTracker t(2);
  CATCH_CHECK_FALSE(t.Version(0).has_value());
  t.MarkArrived(1, 0);
  CATCH_CHECK(t.Version(1) == 0u);
  CATCH_CHECK_FALSE(t.Version(0).has_value());
  CATCH_CHECK_FALSE(t.Version(2).has_value());   // outside the slices
  CATCH_CHECK_FALSE(t.Version(-1).has_value());
  t.Reset(3, 7);
  for (int i = 0; i < 3; ++i) CATCH_CHECK(t.Version(i) == 7u);
}

}  // namespace
}  // namespace p3
