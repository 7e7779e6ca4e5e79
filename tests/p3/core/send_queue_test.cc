#include "p3/core/send_queue.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace p3 {
namespace {

using Queue = SendQueue<std::string>;

CATCH_TEST_CASE("the most urgent message of all lanes goes first; the others wait their turn") {
  Queue link({.priority = true});
  const int a = link.AddLane();
  const int b = link.AddLane();
  link.Push(a, "a-low", /*priority=*/5, 0, 100);
  link.Push(b, "b-high", /*priority=*/1, 0, 100);
  CATCH_CHECK_FALSE(link.TryPop(a).has_value());  // b holds a more urgent message
  std::optional<Queue::Item> first = link.TryPop(b);
  CATCH_REQUIRE(first.has_value());
  CATCH_CHECK(first->value == "b-high");
  // Credit 0: one message on the link at a time, whichever lane it is from.
  CATCH_CHECK_FALSE(link.TryPop(a).has_value());
  link.Release(b, 100);
  std::optional<Queue::Item> second = link.TryPop(a);
  CATCH_REQUIRE(second.has_value());
  CATCH_CHECK(second->value == "a-low");
}

CATCH_TEST_CASE("a high-priority message pushed later overtakes queued ones on other lanes") {
  Queue link({.priority = true});
  const int a = link.AddLane();
  const int b = link.AddLane();
  for (int i = 0; i < 3; ++i) link.Push(a, "a" + std::to_string(i), 10 + i, 0, 1);
  std::optional<Queue::Item> in_flight = link.TryPop(a);
  CATCH_REQUIRE(in_flight.has_value());
  CATCH_CHECK(in_flight->value == "a0");
  link.Push(b, "b-urgent", 0, 0, 1);  // arrives while a0 is on the wire
  link.Release(a, 1);
  CATCH_CHECK_FALSE(link.TryPop(a).has_value());
  std::optional<Queue::Item> next = link.TryPop(b);
  CATCH_REQUIRE(next.has_value());
  CATCH_CHECK(next->value == "b-urgent");
}

CATCH_TEST_CASE("the credit is shared: lanes write side by side only while their bytes fit") {
  Queue link({.priority = true, .credit_bytes = 250});
  const int a = link.AddLane();
  const int b = link.AddLane();
  const int c = link.AddLane();
  link.Push(a, "a", 1, 0, 100);
  link.Push(b, "b", 2, 0, 100);
  link.Push(c, "c", 3, 0, 100);
  CATCH_REQUIRE(link.TryPop(a).has_value());
  CATCH_REQUIRE(link.TryPop(b).has_value());  // a is busy: b is the most urgent idle lane
  CATCH_CHECK_FALSE(link.TryPop(c).has_value());  // 300 > 250
  link.Release(a, 100);
  CATCH_CHECK(link.TryPop(c).has_value());
}

CATCH_TEST_CASE("FIFO order spans the lanes, and urgent messages go first in it too") {
  Queue link({.priority = false});
  const int a = link.AddLane();
  const int b = link.AddLane();
  link.Push(b, "b0", 9, 0, 1);
  link.Push(a, "a0", 0, 0, 1);  // priority ignored in FIFO order
  link.Push(a, "abort", Queue::kUrgent, 0, 0);
  CATCH_CHECK_FALSE(link.TryPop(b).has_value());
  std::optional<Queue::Item> first = link.TryPop(a);
  CATCH_REQUIRE(first.has_value());
  CATCH_CHECK(first->value == "abort");
  link.Release(a, 0);
  CATCH_CHECK_FALSE(link.TryPop(a).has_value());  // b0 was pushed before a0
  CATCH_CHECK(link.TryPop(b)->value == "b0");
}

CATCH_TEST_CASE("a closed lane drops its messages and holds up no other lane") {
  Queue link({.priority = true});
  const int a = link.AddLane();
  const int b = link.AddLane();
  link.Push(a, "a", 0, 0, 1);
  link.Push(b, "b", 5, 0, 1);
  CATCH_CHECK_FALSE(link.TryPop(b).has_value());
  link.Close(a);
  link.Close(a);  // twice is fine
  CATCH_CHECK_FALSE(link.Push(a, "late", 0, 0, 1));
  CATCH_CHECK(link.size(a) == 0);
  CATCH_CHECK(link.TryPop(b)->value == "b");
  CATCH_CHECK_FALSE(link.Pop(a).has_value());  // returns at once
}

CATCH_TEST_CASE("writer threads of several lanes hand out messages in one priority order") {
  Queue link({.priority = true});
  constexpr int kLanes = 3;
  std::vector<int> lanes;
  for (int i = 0; i < kLanes; ++i) lanes.push_back(link.AddLane());
  // Priorities interleaved over the lanes: 0..29, lane = priority % 3, pushed in reverse.
  for (int p = 29; p >= 0; --p) link.Push(lanes[p % kLanes], std::to_string(p), p, 0, 1);
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread> writers;
  for (int lane : lanes) {
    writers.emplace_back([&, lane] {
      while (std::optional<Queue::Item> item = link.Pop(lane)) {
        {
          absl::MutexLock lock(&mu);
          order.push_back(std::stoi(item->value));
          if (order.size() == 30) {
            for (int l : lanes) link.Close(l);
          }
        }
        link.Release(lane, item->bytes);
      }
    });
  }
  for (std::thread& t : writers) t.join();
  CATCH_REQUIRE(order.size() == 30);
  for (int i = 0; i < 30; ++i) CATCH_CHECK(order[i] == i);
}

CATCH_TEST_CASE("one lane pops higher priority first, then tiebreak, then push order") {
  Queue link({.priority = true});
  const int lane = link.AddLane();
  link.Push(lane, "low", 5, 0, 1);
  link.Push(lane, "high-b", 1, 2, 1);
  link.Push(lane, "high-a", 1, 1, 1);
  link.Push(lane, "high-a2", 1, 1, 1);
  std::vector<std::string> order;
  while (std::optional<Queue::Item> item = link.TryPop(lane)) {
    order.push_back(item->value);
    link.Release(lane, item->bytes);
  }
  CATCH_CHECK(order == std::vector<std::string>{"high-a", "high-a2", "high-b", "low"});
}

CATCH_TEST_CASE("a released lane holds up nobody, refuses pushes, and its index is reused") {
  SendQueue<int> link;
  const int a = link.AddLane();
  const int b = link.AddLane();
  CATCH_CHECK(link.Push(a, 1, /*priority=*/0, 0, 10));  // more urgent, never written
  CATCH_CHECK(link.Push(b, 2, /*priority=*/5, 0, 10));
  CATCH_CHECK_FALSE(link.TryPop(b).has_value());  // a's message goes first
  link.Close(a);
  link.ReleaseLane(a);
  link.ReleaseLane(a);  // twice: nothing happens
  CATCH_CHECK_FALSE(link.Push(a, 3, 0, 0, 10));
  std::optional<SendQueue<int>::Item> item = link.TryPop(b);
  CATCH_REQUIRE(item.has_value());
  CATCH_CHECK(item->value == 2);
  link.Release(b, item->bytes);
  // A connection that comes later gets the freed index, and a lane as good as new.
  const int c = link.AddLane();
  CATCH_CHECK(c == a);
  CATCH_CHECK(link.size(c) == 0);
  CATCH_CHECK(link.Push(c, 4, 0, 0, 10));
  item = link.TryPop(c);
  CATCH_REQUIRE(item.has_value());
  CATCH_CHECK(item->value == 4);
  CATCH_CHECK(link.AddLane() == 2);  // no free index left: a new one
}

CATCH_TEST_CASE("closing a lane wakes its blocked writer") {
  Queue link;
  const int lane = link.AddLane();
  bool got_nullopt = false;
  std::thread writer([&] { got_nullopt = !link.Pop(lane).has_value(); });
  link.AwaitWaiters(1);  // blocked in Pop(): Close() must wake it
  link.Close(lane);
  writer.join();
  CATCH_CHECK(got_nullopt);
}

CATCH_TEST_CASE("a message in flight past stalled_after frees the link; its own lane still waits") {
  const absl::Duration stalled = absl::Milliseconds(300);
  Queue link({.priority = true, .credit_bytes = 0, .stalled_after = stalled});
  const int a = link.AddLane();  // its peer stops reading
  const int b = link.AddLane();
  const int c = link.AddLane();
  link.Push(a, "a0", 1, 0, 100);
  link.Push(a, "a1", 2, 0, 100);
  link.Push(b, "b0", 3, 0, 100);
  link.Push(c, "c0", 4, 0, 100);
  const absl::Time popped = absl::Now();
  CATCH_REQUIRE(link.TryPop(a).has_value());
  // Not stalled yet: credit 0 holds b. (On a machine slow enough to reach the bound
  // before this line, the check would say nothing: skipped.)
  if (absl::Now() - popped < stalled - absl::Milliseconds(50)) {
    CATCH_CHECK_FALSE(link.TryPop(b).has_value());
  }
  absl::SleepFor(popped + stalled - absl::Now() + absl::Milliseconds(20));
  std::optional<Queue::Item> next = link.TryPop(b);
  CATCH_REQUIRE(next.has_value());
  CATCH_CHECK(next->value == "b0");
  CATCH_CHECK(link.stalled_messages() == 1);
  // b's message is fresh: it holds the credit again, so c waits for it, and a waits for its own.
  CATCH_CHECK_FALSE(link.TryPop(c).has_value());
  CATCH_CHECK_FALSE(link.TryPop(a).has_value());
  link.Release(b, 100);
  CATCH_CHECK(link.TryPop(c).has_value());
  link.Release(a, 100);  // the peer read it after all
  CATCH_CHECK_FALSE(link.TryPop(a).has_value());  // c in flight, not stalled
  link.Release(c, 100);
  std::optional<Queue::Item> last = link.TryPop(a);
  CATCH_REQUIRE(last.has_value());
  CATCH_CHECK(last->value == "a1");
  CATCH_CHECK(link.stalled_messages() == 1);
}

CATCH_TEST_CASE("a writer blocked behind a stalled message wakes when it stalls, not before") {
  const absl::Duration stalled = absl::Milliseconds(200);
  Queue link({.priority = true, .credit_bytes = 0, .stalled_after = stalled});
  const int a = link.AddLane();
  const int b = link.AddLane();
  link.Push(a, "a0", 1, 0, 100);
  link.Push(b, "b0", 2, 0, 100);
  const absl::Time popped = absl::Now();
  CATCH_REQUIRE(link.TryPop(a).has_value());  // never released
  absl::Time woke;
  std::optional<Queue::Item> got;
  std::thread writer([&] {
    got = link.Pop(b);
    woke = absl::Now();
  });
  writer.join();
  CATCH_REQUIRE(got.has_value());
  CATCH_CHECK(got->value == "b0");
  CATCH_CHECK(woke - popped >= stalled);
}

CATCH_TEST_CASE("a writer already waiting when another message goes in flight wakes at its stall") {
  const absl::Duration stalled = absl::Milliseconds(100);
  Queue link({.priority = true, .credit_bytes = 0, .stalled_after = stalled});
  const int a = link.AddLane();
  const int b = link.AddLane();
  std::optional<Queue::Item> got;
  std::thread writer([&] { got = link.Pop(b); });
  link.AwaitWaiters(1);  // b waits on an empty lane: nothing in flight, no stall to wait for
  link.Push(a, "a0", 1, 0, 100);
  CATCH_REQUIRE(link.TryPop(a).has_value());  // never released
  link.Push(b, "b0", 2, 0, 100);
  // b must learn the new stall time; a writer that kept its old (infinite) one would wait
  // for ever: the lane is closed after 10 s so that such a failure ends.
  absl::Notification done;
  std::thread guard([&] {
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(10))) link.Close(b);
  });
  writer.join();
  done.Notify();
  guard.join();
  CATCH_REQUIRE(got.has_value());
  CATCH_CHECK(got->value == "b0");
}

CATCH_TEST_CASE("with stalled_after infinite a message in flight holds the link until released") {
  Queue link({.priority = true, .credit_bytes = 0, .stalled_after = absl::InfiniteDuration()});
  const int a = link.AddLane();
  const int b = link.AddLane();
  link.Push(a, "a0", 1, 0, 100);
  link.Push(b, "b0", 2, 0, 100);
  CATCH_REQUIRE(link.TryPop(a).has_value());
  absl::SleepFor(absl::Milliseconds(100));
  CATCH_CHECK_FALSE(link.TryPop(b).has_value());
  CATCH_CHECK(link.stalled_messages() == 0);
  link.Release(a, 100);
  CATCH_CHECK(link.TryPop(b).has_value());
}

CATCH_TEST_CASE("a writer waiting on an empty lane sleeps through other lanes' traffic") {
  Queue link({.priority = true, .credit_bytes = 0});
  const int a = link.AddLane();
  const int b = link.AddLane();
  std::optional<Queue::Item> got;
  absl::Notification returned;
  std::thread writer([&] {
    got = link.Pop(b);
    returned.Notify();
  });
  link.AwaitWaiters(1);
  // Each hand-out on a changes the link's stall times; b has nothing to hand out, so it
  // has nothing to recompute. (A writer woken for each would count an idle wake-up here.)
  for (int i = 0; i < 1000; ++i) {
    link.Push(a, "a", 1, i, 100);
    std::optional<Queue::Item> item = link.TryPop(a);
    CATCH_REQUIRE(item.has_value());
    link.Release(a, 100);
  }
  link.Push(b, "b0", 1, 0, 100);
  const bool in_time = returned.WaitForNotificationWithTimeout(absl::Seconds(10));
  if (!in_time) link.Close(b);
  writer.join();
  CATCH_CHECK(in_time);
  CATCH_REQUIRE(got.has_value());
  CATCH_CHECK(got->value == "b0");
  CATCH_CHECK(link.idle_wakeups() == 0);
}

// Every message the lane hands out now: Pop's, then PopAlso's while `accept` takes them.
std::vector<std::string> TakeBatch(Queue* link, int lane, int64_t* bytes,
                                   bool (*accept)(const std::string&)) {
  std::vector<std::string> batch;
  std::optional<Queue::Item> first = link->TryPop(lane);
  if (!first.has_value()) return batch;
  batch.push_back(first->value);
  *bytes = first->bytes;
  while (std::optional<Queue::Item> more = link->PopAlso(lane, accept)) {
    batch.push_back(more->value);
    *bytes += more->bytes;
  }
  return batch;
}

bool Any(const std::string&) { return true; }
bool NotControl(const std::string& s) { return s.rfind("control", 0) != 0; }

CATCH_TEST_CASE("PopAlso hands out what Pop would next, in order, joined to the one in flight") {
  Queue link({.priority = true});
  const int lane = link.AddLane();
  link.Push(lane, "p5", 5, 0, 10);
  link.Push(lane, "p1", 1, 0, 10);
  link.Push(lane, "p3-b", 3, 2, 10);
  link.Push(lane, "p3-a", 3, 1, 10);
  CATCH_CHECK_FALSE(link.PopAlso(lane, Any).has_value());  // nothing in flight: Pop's job
  int64_t bytes = 0;
  CATCH_CHECK(TakeBatch(&link, lane, &bytes, Any) ==
              std::vector<std::string>{"p1", "p3-a", "p3-b", "p5"});
  CATCH_CHECK(bytes == 40);
  // The four are one message in flight: nothing more until one Release of all their bytes.
  link.Push(lane, "later", 0, 0, 10);
  CATCH_CHECK_FALSE(link.TryPop(lane).has_value());
  link.Release(lane, bytes);
  std::optional<Queue::Item> next = link.TryPop(lane);
  CATCH_REQUIRE(next.has_value());
  CATCH_CHECK(next->value == "later");
}

CATCH_TEST_CASE("PopAlso stops at a message it does not accept, which goes next on its own") {
  Queue link({.priority = true});
  const int lane = link.AddLane();
  link.Push(lane, "g1", 1, 0, 1);
  link.Push(lane, "control", 2, 0, 1);
  link.Push(lane, "g3", 3, 0, 1);
  int64_t bytes = 0;
  CATCH_CHECK(TakeBatch(&link, lane, &bytes, NotControl) == std::vector<std::string>{"g1"});
  link.Release(lane, bytes);
  std::optional<Queue::Item> control = link.TryPop(lane);  // a writer sends it on its own
  CATCH_REQUIRE(control.has_value());
  CATCH_CHECK(control->value == "control");
  link.Release(lane, control->bytes);
  CATCH_CHECK(TakeBatch(&link, lane, &bytes, NotControl) == std::vector<std::string>{"g3"});
}

CATCH_TEST_CASE("PopAlso never passes another lane's more urgent message, nor the credit") {
  Queue link({.priority = true, .credit_bytes = 100});
  const int a = link.AddLane();
  const int b = link.AddLane();
  const int c = link.AddLane();
  link.Push(a, "a1", 1, 0, 10);
  link.Push(a, "a5", 5, 0, 10);
  link.Push(b, "b3", 3, 0, 10);
  int64_t bytes = 0;
  // b's message is more urgent than a5: a's batch ends before it.
  CATCH_CHECK(TakeBatch(&link, a, &bytes, Any) == std::vector<std::string>{"a1"});
  CATCH_CHECK(TakeBatch(&link, b, &bytes, Any) == std::vector<std::string>{"b3"});
  link.Release(b, 10);
  link.Release(a, 10);
  // The batch counts as one message against the credit: c holds 60 of the 100.
  link.Push(c, "c0", 0, 0, 60);
  CATCH_REQUIRE(link.TryPop(c).has_value());
  link.Push(a, "a6", 6, 0, 30);
  link.Push(a, "a7", 7, 0, 20);
  std::optional<Queue::Item> first = link.TryPop(a);  // a5: 60 + 10 fit
  CATCH_REQUIRE(first.has_value());
  CATCH_CHECK(first->value == "a5");
  std::optional<Queue::Item> second = link.PopAlso(a, Any);  // 60 + 10 + 30 fit
  CATCH_REQUIRE(second.has_value());
  CATCH_CHECK(second->value == "a6");
  CATCH_CHECK_FALSE(link.PopAlso(a, Any).has_value());  // 60 + 10 + 30 + 20 do not
  CATCH_CHECK(link.size(a) == 1);
}

CATCH_TEST_CASE("PopAlsoInto fills a batch up to its size and returns the bytes of all") {
  Queue link({.priority = true});
  const int lane = link.AddLane();
  for (int i = 0; i < 5; ++i) link.Push(lane, "g" + std::to_string(i), i, 0, 10 + i);
  std::vector<Queue::Item> batch;
  std::optional<Queue::Item> first = link.TryPop(lane);
  CATCH_REQUIRE(first.has_value());
  batch.push_back(*std::move(first));
  const int64_t bytes = link.PopAlsoInto(lane, Any, 3, &batch);
  CATCH_REQUIRE(batch.size() == 3);
  CATCH_CHECK(batch[0].value == "g0");
  CATCH_CHECK(batch[1].value == "g1");
  CATCH_CHECK(batch[2].value == "g2");
  CATCH_CHECK(bytes == 10 + 11 + 12);
  CATCH_CHECK(link.size(lane) == 2);  // the rest wait for the batch's one Release
  CATCH_CHECK_FALSE(link.TryPop(lane).has_value());
  link.Release(lane, bytes);
  std::optional<Queue::Item> next = link.TryPop(lane);
  CATCH_REQUIRE(next.has_value());
  CATCH_CHECK(next->value == "g3");
}

}  // namespace
}  // namespace p3
