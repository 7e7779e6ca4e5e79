#include "worker/first_failure.h"

#include <thread>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace p3 {
namespace {

CATCH_TEST_CASE("the first failure stays; a follow-on recorded after it changes nothing") {
  FirstFailure failure;
  CATCH_CHECK(failure.Get().ok());
  CATCH_CHECK_FALSE(failure.Record(absl::OkStatus()));
  CATCH_CHECK(failure.Get().ok());
  const absl::Status lost = absl::UnavailableError("server 1 (10.0.0.2:50051): Socket closed");
  CATCH_CHECK(failure.Record(lost));
  CATCH_CHECK_FALSE(failure.Record(
      absl::DeadlineExceededError("worker 0: waited 5s for parameters: ...")));
  CATCH_CHECK_FALSE(failure.Record(absl::CancelledError("stream cancelled")));
  CATCH_CHECK(failure.Get() == lost);
  // An Abort after the failure is a follow-on too, and does not wait.
  const absl::Time start = absl::Now();
  CATCH_CHECK_FALSE(failure.Abort(absl::AbortedError("server 0 aborted the run"), absl::Hours(1)));
  CATCH_CHECK(absl::Now() - start < absl::Minutes(1));
  CATCH_CHECK(failure.Get() == lost);
}

CATCH_TEST_CASE("an Abort with no failure of the worker's own within the grace is the failure") {
  FirstFailure failure;
  const absl::Status abort = absl::UnavailableError(
      "server 0 aborted the run: worker 1: worker 1 disconnected before it was done");
  CATCH_CHECK(failure.Abort(abort, absl::Milliseconds(10)));
  CATCH_CHECK(failure.Get() == abort);
  CATCH_CHECK_FALSE(failure.Record(absl::UnavailableError("server 1: Socket closed")));
  CATCH_CHECK(failure.Get() == abort);
}

CATCH_TEST_CASE("a failure of the worker's own during an Abort's grace is the cause, quoting it") {
  FirstFailure failure;
  absl::Notification aborted;
  bool abort_recorded = true;
  std::thread reader([&] {
    abort_recorded = failure.Abort(
        absl::UnavailableError(
            "server 0 aborted the run: worker 1: worker 1 disconnected before it was done"),
        absl::Hours(1));  // Ends when the Record below comes, not at the grace.
    aborted.Notify();
  });
  // The worker's own failure comes while the Abort is held.
  while (!failure.holding_abort()) std::this_thread::yield();
  CATCH_CHECK(failure.Record(absl::UnavailableError("server 1 (10.0.0.2:50051): server died")));
  reader.join();
  CATCH_CHECK_FALSE(abort_recorded);
  CATCH_CHECK(absl::IsUnavailable(failure.Get()));
  CATCH_CHECK(failure.Get().message() ==
              "server 1 (10.0.0.2:50051): server died (then server 0 aborted the run: worker 1: "
              "worker 1 disconnected before it was done, which follows from it)");
  CATCH_CHECK(aborted.HasBeenNotified());
}

}  // namespace
}  // namespace p3
