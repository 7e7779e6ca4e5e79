#include "p3/send_queue.h"

#include <string>
#include <thread>

#include <catch2/catch.hpp>

namespace p3 {
namespace {

std::string PopValue(PrioritySendQueue<std::string>& q) {
  auto item = q.Pop();
  CATCH_REQUIRE(item.has_value());
  q.Release(item->bytes);
  return item->value;
}

CATCH_TEST_CASE("priority queue pops higher priority first, FIFO within ties") {
  PrioritySendQueue<std::string> q({.priority = true});
  q.Push("late-layer", 5, 0, 1);
  q.Push("first-layer-a", 0, 0, 1);
  q.Push("mid", 2, 0, 1);
  q.Push("first-layer-b", 0, 0, 1);
  CATCH_CHECK(PopValue(q) == "first-layer-a");
  CATCH_CHECK(PopValue(q) == "first-layer-b");
  CATCH_CHECK(PopValue(q) == "mid");
  CATCH_CHECK(PopValue(q) == "late-layer");
}

CATCH_TEST_CASE("tiebreak orders slices of the same priority") {
  PrioritySendQueue<std::string> q({.priority = true});
  q.Push("slice-2", 1, 2, 1);
  q.Push("slice-1", 1, 1, 1);
  CATCH_CHECK(PopValue(q) == "slice-1");
  CATCH_CHECK(PopValue(q) == "slice-2");
}

CATCH_TEST_CASE("FIFO queue ignores priorities") {
  PrioritySendQueue<std::string> q({.priority = false});
  q.Push("a", 9, 0, 1);
  q.Push("b", 0, 0, 1);
  CATCH_CHECK(PopValue(q) == "a");
  CATCH_CHECK(PopValue(q) == "b");
}

CATCH_TEST_CASE("a high-priority message pushed later overtakes those not yet handed out") {
  PrioritySendQueue<std::string> q({.priority = true, .credit_bytes = 0});
  q.Push("low-1", 9, 0, 100);
  auto first = q.Pop();  // handed to the transport: in flight
  CATCH_REQUIRE(first.has_value());
  CATCH_CHECK(first->value == "low-1");
  q.Push("low-2", 9, 1, 100);
  q.Push("urgent", 0, 0, 100);
  CATCH_CHECK_FALSE(q.TryPop().has_value());  // one message at a time
  q.Release(first->bytes);
  CATCH_CHECK(PopValue(q) == "urgent");
  CATCH_CHECK(PopValue(q) == "low-2");
}

CATCH_TEST_CASE("only the credit's bytes are handed out before a release") {
  PrioritySendQueue<std::string> q({.priority = true, .credit_bytes = 250});
  q.Push("a", 0, 0, 100);
  q.Push("b", 0, 1, 100);
  q.Push("c", 0, 2, 100);
  auto a = q.Pop();
  auto b = q.Pop();
  CATCH_REQUIRE(a.has_value());
  CATCH_REQUIRE(b.has_value());
  // A third would exceed the credit (300 > 250): nothing until a release.
  CATCH_CHECK_FALSE(q.TryPop().has_value());
  q.Release(a->bytes);
  auto c = q.TryPop();
  CATCH_REQUIRE(c.has_value());
  CATCH_CHECK(c->value == "c");
}

CATCH_TEST_CASE("closing wakes a blocked consumer and refuses further pushes") {
  PrioritySendQueue<std::string> q;
  bool got_nullopt = false;
  std::thread consumer([&] { got_nullopt = !q.Pop().has_value(); });
  q.AwaitWaiters(1);  // The consumer is blocked in Pop(): Close() must wake it.
  CATCH_CHECK(q.waiters() == 1);
  q.Close();
  consumer.join();
  CATCH_CHECK(got_nullopt);
  CATCH_CHECK(q.waiters() == 0);
  CATCH_CHECK_FALSE(q.Push("x", 0, 0, 1));
  q.Close();  // twice is fine
}

}  // namespace
}  // namespace p3
