// The send order of one process's link: several connections (lanes) that share the
// machine's network link, with one priority order and one credit across all of them.
//
// gRPC ignores HTTP/2 priorities and allows one outstanding write per stream, so the
// order in which messages are handed to gRPC is the order on the wire. A queue per
// stream would order only its own stream: a worker's S streams, or a server's W streams,
// would each put their next message on the same link at once, a low-priority slice to one server beside a high-priority slice to
// another. Here a lane's writer may hand its next message to the transport only when no
// other idle lane holds a more urgent one, and when the bytes handed over and not yet
// released, over all lanes, stay within the credit. Each lane keeps at most one message
// in flight (gRPC's one outstanding write per stream).
//
// Example (one writer thread per lane):
//   SendQueue<Msg> link({.priority = true, .credit_bytes = 0});
//   const int lane = link.AddLane();
//   link.Push(lane, msg, /*priority=*/tensor_index, /*tiebreak=*/slice_id, bytes);
//   while (std::optional<SendQueue<Msg>::Item> item = link.Pop(lane)) {
//     stream->Write(item->value);  // returns once the bytes are in the kernel
//     link.Release(lane, item->bytes);
//   }
//
// Order: smallest (priority, tiebreak) first, then push order; FIFO options: push order
// over all lanes. kUrgent goes ahead of everything in either order (an Abort must not
// wait behind queued data). Thread-safe.
//
// A peer that stops reading (stopped, or its receive window full) would hold its lane's
// message in flight, and with it the link's credit: every other lane would wait too. A
// message in flight longer than `stalled_after` therefore stops counting against the
// credit; its own lane still waits for it (one message in flight per lane), the others go
// on. The dead peer itself is declared by the transports' own bounds (peer_timeout).
#ifndef P3_P3_CORE_SEND_QUEUE_H_
#define P3_P3_CORE_SEND_QUEUE_H_

#include <cstdint>
#include <limits>
#include <algorithm>
#include <memory>
#include <optional>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace p3 {

struct SendQueueOptions {
  // true: the smallest (priority, tiebreak) first, push order among equal keys.
  // false: push order (FIFO). Default: true.
  bool priority = true;
  // Bytes that may be handed out and not yet released. One message is always allowed
  // when nothing is in flight; 0 means exactly one message at a time. Default: 0.
  int64_t credit_bytes = 0;
  // A message handed out this long ago and not yet released no longer holds the credit
  // (scheduling.stalled_write_s). absl::InfiniteDuration(): it holds it until released.
  // Default: 1 s.
  absl::Duration stalled_after = absl::Seconds(1);
};

template <typename T>
class SendQueue {
 public:
  // Ahead of everything, in priority and FIFO order alike.
  static constexpr int64_t kUrgent = std::numeric_limits<int64_t>::min();

  struct Item {
    T value;
    int64_t bytes = 0;
  };

  // options.priority: priority order (else FIFO); options.credit_bytes: bytes over all
  // lanes that may be handed out and not yet released; one message is always allowed
  // when nothing is in flight, so 0 means one message at a time on the link. Default: 0.
  explicit SendQueue(SendQueueOptions options = {}) : options_(options) {}

  // A new lane (one connection); returns its index, which may be one that
  // ReleaseLane() gave back.
  int AddLane() {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < lanes_.size(); ++i) {
      if (lanes_[i] == nullptr) {
        lanes_[i] = std::make_unique<Lane>();
        return static_cast<int>(i);
      }
    }
    lanes_.push_back(std::make_unique<Lane>());
    return static_cast<int>(lanes_.size()) - 1;
  }

  // Frees `lane` once its connection is gone: drops what it still queues and hands its
  // index back to AddLane(). A process whose connections come and go — a server whose
  // workers rejoin — would otherwise keep every old lane and its queue's storage (a
  // closed lane's heap keeps its capacity). The lane's writer must have returned, and
  // Released its message in flight; nobody may use the index afterwards.
  void ReleaseLane(int lane) {
    absl::MutexLock lock(&mu_);
    if (lane < 0 || lane >= static_cast<int>(lanes_.size()) || lanes_[lane] == nullptr) return;
    lanes_[lane].reset();
  }

  // Adds `value` to `lane`. Returns false (dropping it) once the lane is closed or
  // released.
  bool Push(int lane, T value, int64_t priority, int64_t tiebreak, int64_t bytes) {
    absl::MutexLock lock(&mu_);
    if (lanes_[lane] == nullptr) return false;  // released
    Lane& l = *lanes_[lane];
    if (l.closed) return false;
    const int64_t seq = next_seq_++;
    Key key{0, 0, seq};
    if (priority == kUrgent) {
      key = Key{kUrgent, 0, seq};
    } else if (options_.priority) {
      key = Key{priority, tiebreak, seq};
    }
    l.heap.push(Entry{key, Item{std::move(value), bytes}});
    return true;
  }

  // Blocks until `lane`'s most urgent message is the link's turn and fits the credit,
  // and returns it; std::nullopt once the lane is closed.
  std::optional<Item> Pop(int lane) {
    absl::MutexLock lock(&mu_);
    // A message in flight that turns stalled changes the turn without a Release: wake
    // when the next one would, and recompute when that is once another goes in flight.
    // Only a lane with a message waiting, and none of its own in flight, can be held back
    // by the credit, so only such a lane needs the new time: a writer waiting on an empty
    // lane sleeps through the other lanes' hand-outs, and learns the time when a message
    // is queued for it.
    int64_t seen = handouts_;
    absl::Time deadline = NextStall();
    auto ready = [this, lane, &seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const Lane& l = *lanes_[lane];
      return l.closed || Turn(lane) || (handouts_ != seen && !l.heap.empty() && !l.in_flight);
    };
    ++waiters_;
    while (true) {
      mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
      if (lanes_[lane]->closed || Turn(lane)) break;
      ++idle_wakeups_;
      seen = handouts_;
      deadline = NextStall();
    }
    --waiters_;
    if (lanes_[lane]->closed) return std::nullopt;
    return TakeTop(lane);
  }

  // Like Pop(), but std::nullopt at once when it is not `lane`'s turn (or it is closed).
  std::optional<Item> TryPop(int lane) {
    absl::MutexLock lock(&mu_);
    if (lanes_[lane]->closed || !Turn(lane)) return std::nullopt;
    return TakeTop(lane);
  }

  // After Pop() or TryPop() handed `lane` a message, before its Release(): the lane's
  // next message when `accept(value)` holds and Pop() would hand it out at once if the
  // message in flight were released now (the same order over the lanes), and the credit
  // admits the batch with it as one message (as Pop: always when no other lane has one in
  // flight); else std::nullopt, at once.
  // It joins the message in flight: one Release(lane, the bytes of all) ends them
  // together. For a writer that sends several ready messages as one (a colocated pair's
  // shared-memory descriptors); it never waits to fill a batch.
  template <typename Accept>
  std::optional<Item> PopAlso(int lane, Accept accept) {
    absl::MutexLock lock(&mu_);
    Lane& l = *lanes_[lane];
    if (l.closed || !l.in_flight || l.heap.empty()) return std::nullopt;
    const Entry& top = l.heap.top();
    if (!accept(static_cast<const T&>(top.item.value))) return std::nullopt;
    for (size_t i = 0; i < lanes_.size(); ++i) {
      if (lanes_[i] == nullptr || static_cast<int>(i) == lane) continue;
      const Lane& other = *lanes_[i];
      if (other.closed || other.in_flight || other.heap.empty()) continue;
      if (other.heap.top().key < top.key) return std::nullopt;
    }
    // The batch is one message: with others in flight, all of it must fit the credit.
    if (in_flight_items_ > 1 && in_flight_bytes_ + top.item.bytes > options_.credit_bytes) {
      return std::nullopt;
    }
    Item item = std::move(const_cast<Entry&>(top).item);
    l.heap.pop();
    l.in_flight_bytes += item.bytes;
    in_flight_bytes_ += item.bytes;
    return item;
  }

  // A writer's batch: `batch` holds the message Pop() or TryPop() just handed `lane`
  // (and any PopAlso() joined to it); appends what PopAlso(lane, accept) hands out at once
  // until `batch` holds `max_items`, and returns the bytes of every message in it, which
  // the batch's one Release() takes. Never waits.
  template <typename Accept>
  int64_t PopAlsoInto(int lane, Accept accept, int max_items, std::vector<Item>* batch) {
    while (static_cast<int>(batch->size()) < max_items) {
      std::optional<Item> more = PopAlso(lane, accept);
      if (!more.has_value()) break;
      batch->push_back(*std::move(more));
    }
    int64_t bytes = 0;
    for (const Item& item : *batch) bytes += item.bytes;
    return bytes;
  }

  // The transport is done with `lane`'s message of `bytes` returned by Pop().
  void Release(int lane, int64_t bytes) {
    absl::MutexLock lock(&mu_);
    Lane& l = *lanes_[lane];
    l.in_flight = false;
    l.in_flight_bytes = 0;
    in_flight_bytes_ -= bytes;
    --in_flight_items_;
  }

  // Messages that were in flight longer than stalled_after when another lane's turn was
  // decided past them (each counted once).
  int64_t stalled_messages() const {
    absl::MutexLock lock(&mu_);
    return stalled_messages_;
  }

  // Wakes `lane`'s Pop() with std::nullopt and drops what it has queued; the other lanes
  // go on. Safe to call twice.
  void Close(int lane) {
    absl::MutexLock lock(&mu_);
    Lane& l = *lanes_[lane];
    l.closed = true;
    while (!l.heap.empty()) l.heap.pop();
  }

  // Times a writer blocked in Pop() woke without a message to hand out (to learn when a
  // message in flight turns stalled, or at that time). For tests and monitoring.
  int64_t idle_wakeups() const {
    absl::MutexLock lock(&mu_);
    return idle_wakeups_;
  }

  // Lane indices in use or free for reuse: the most lanes that were ever live at once.
  // A process whose connections come and go keeps this bounded with ReleaseLane().
  size_t lane_slots() const {
    absl::MutexLock lock(&mu_);
    return lanes_.size();
  }

  size_t size(int lane) const {
    absl::MutexLock lock(&mu_);
    return lanes_[lane]->heap.size();
  }

  // For tests: returns once at least `n` threads are blocked in Pop().
  void AwaitWaiters(int n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiters_ >= n; };
    mu_.Await(absl::Condition(&enough));
  }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t>;  // priority, tiebreak, sequence
  struct Entry {
    Key key;
    Item item;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const { return a.key > b.key; }
  };
  struct Lane {
    std::priority_queue<Entry, std::vector<Entry>, Later> heap;
    bool in_flight = false;
    bool closed = false;
    // The message in flight: its bytes, since when, and whether it was counted stalled.
    int64_t in_flight_bytes = 0;
    absl::Time since;
    bool counted_stalled = false;
  };

  Item TakeTop(int lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Lane& l = *lanes_[lane];
    // priority_queue only exposes a const top; the entry is popped right after the move.
    Item item = std::move(const_cast<Entry&>(l.heap.top()).item);
    l.heap.pop();
    l.in_flight = true;
    l.in_flight_bytes = item.bytes;
    if (options_.stalled_after != absl::InfiniteDuration()) l.since = absl::Now();
    l.counted_stalled = false;
    ++handouts_;
    in_flight_bytes_ += item.bytes;
    ++in_flight_items_;
    return item;
  }

  // When the next message in flight that is not stalled yet turns stalled;
  // InfiniteFuture if none will.
  absl::Time NextStall() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Time next = absl::InfiniteFuture();
    if (in_flight_items_ == 0 || options_.stalled_after == absl::InfiniteDuration()) return next;
    const absl::Time now = absl::Now();
    for (const auto& l : lanes_) {
      if (l == nullptr || !l->in_flight) continue;
      const absl::Time at = l->since + options_.stalled_after;
      if (at > now) next = std::min(next, at);
    }
    return next;
  }

  // `lane` may hand out its top now: it has one, no idle lane has a more urgent one, and
  // the credit admits it, counting only the messages in flight that are not stalled.
  // Reads the clock only when the credit alone says no. Not const: counts the stalled
  // messages it passes.
  bool Turn(int lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Lane& l = *lanes_[lane];
    if (l.heap.empty() || l.in_flight) return false;
    const Entry& top = l.heap.top();
    for (size_t i = 0; i < lanes_.size(); ++i) {
      if (lanes_[i] == nullptr) continue;  // released
      const Lane& other = *lanes_[i];
      if (static_cast<int>(i) == lane || other.closed || other.in_flight || other.heap.empty()) {
        continue;
      }
      if (other.heap.top().key < top.key) return false;
    }
    if (in_flight_items_ == 0) return true;
    if (in_flight_bytes_ + top.item.bytes <= options_.credit_bytes) return true;
    if (options_.stalled_after == absl::InfiniteDuration()) return false;
    const absl::Time now = absl::Now();
    int64_t holding_bytes = 0;
    int64_t holding_items = 0;
    for (const auto& other : lanes_) {
      if (other == nullptr || !other->in_flight) continue;
      if (now - other->since < options_.stalled_after) {
        holding_bytes += other->in_flight_bytes;
        ++holding_items;
      }
    }
    if (holding_items > 0 && holding_bytes + top.item.bytes > options_.credit_bytes) return false;
    for (auto& other : lanes_) {
      if (other == nullptr || !other->in_flight || other->counted_stalled) continue;
      if (now - other->since >= options_.stalled_after) {
        other->counted_stalled = true;
        ++stalled_messages_;
      }
    }
    return true;
  }

  const SendQueueOptions options_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Lane>> lanes_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_items_ ABSL_GUARDED_BY(mu_) = 0;
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stalled_messages_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t handouts_ ABSL_GUARDED_BY(mu_) = 0;  // messages handed out so far
  int64_t idle_wakeups_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace p3

#endif  // P3_P3_CORE_SEND_QUEUE_H_
