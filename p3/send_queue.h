// The application-level send queue of one connection: it decides the order on the wire.
//
// gRPC ignores HTTP/2 priorities and allows one outstanding write per stream, so the
// order in which messages are handed to gRPC is the order on the wire. This queue holds
// every message not yet handed over and keeps the bytes handed over (not yet released)
// within a credit: a high-priority message pushed later overtakes lower-priority ones
// still waiting here.
//
// Example (one sender thread per connection):
//   PrioritySendQueue<Msg> queue({.priority = true});
//   queue.Push(msg, /*priority=*/tensor_index, /*tiebreak=*/slice_id, bytes);  // any thread
//   while (std::optional<PrioritySendQueue<Msg>::Item> item = queue.Pop()) {
//     stream->Write(item->value);   // the one write in flight
//     queue.Release(item->bytes);
//   }
//
// Thread-safe: any number of producers, any number of consumers.
#ifndef P3_P3_SEND_QUEUE_H_
#define P3_P3_SEND_QUEUE_H_

#include <cstdint>
#include <optional>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace p3 {

struct SendQueueOptions {
  // true: pop the smallest (priority, tiebreak) first, FIFO among equal keys.
  // false: pop in push order (FIFO). Default: true.
  bool priority = true;
  // Bytes that may be handed out and not yet released. One message is always allowed,
  // however large; 0 means exactly one message at a time. Default: 0.
  int64_t credit_bytes = 0;
};

template <typename T>
class PrioritySendQueue {
 public:
  struct Item {
    T value;
    int64_t bytes = 0;
  };

  explicit PrioritySendQueue(SendQueueOptions options = {}) : options_(options) {}

  // Adds `value`. Smaller `priority` is sent sooner; `tiebreak` orders equal priorities.
  // Returns false (and drops `value`) once the queue is closed.
  bool Push(T value, int64_t priority, int64_t tiebreak, int64_t bytes) {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    const int64_t seq = next_seq_++;
    Key key = options_.priority ? Key{priority, tiebreak, seq} : Key{0, 0, seq};
    heap_.push(Entry{key, Item{std::move(value), bytes}});
    return true;
  }

  // Blocks until the highest-priority item fits in the credit, and returns it;
  // std::nullopt once the queue is closed.
  std::optional<Item> Pop() {
    absl::MutexLock lock(&mu_);
    ++waiters_;
    mu_.Await(absl::Condition(this, &PrioritySendQueue::CanPopOrClosed));
    --waiters_;
    if (closed_) return std::nullopt;
    return TakeTop();
  }

  // Like Pop(), but returns std::nullopt at once when nothing may be handed out now.
  std::optional<Item> TryPop() {
    absl::MutexLock lock(&mu_);
    if (closed_ || !CanPopOrClosed()) return std::nullopt;
    return TakeTop();
  }

  // The transport is done with an item of `bytes` returned by Pop().
  void Release(int64_t bytes) {
    absl::MutexLock lock(&mu_);
    in_flight_bytes_ -= bytes;
    --in_flight_items_;
  }

  // Wakes every Pop() with std::nullopt and drops what is queued. Safe to call twice.
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    while (!heap_.empty()) heap_.pop();
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return heap_.size();
  }

  // Threads blocked in Pop() now. For tests and monitoring.
  int waiters() const {
    absl::MutexLock lock(&mu_);
    return waiters_;
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

  Item TakeTop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // priority_queue only exposes a const top; the entry is popped right after the move.
    Item item = std::move(const_cast<Entry&>(heap_.top()).item);
    heap_.pop();
    in_flight_bytes_ += item.bytes;
    ++in_flight_items_;
    return item;
  }

  bool CanPopOrClosed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closed_) return true;
    if (heap_.empty()) return false;
    if (in_flight_items_ == 0) return true;
    return in_flight_bytes_ + heap_.top().item.bytes <= options_.credit_bytes;
  }

  const SendQueueOptions options_;
  mutable absl::Mutex mu_;
  std::priority_queue<Entry, std::vector<Entry>, Later> heap_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_items_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;  // Threads inside Pop()'s wait.
};

}  // namespace p3

#endif  // P3_P3_SEND_QUEUE_H_
