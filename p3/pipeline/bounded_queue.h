// A bounded, closable FIFO queue that hands work between the threads of a pipeline:
// activations forward from stage k to stage k+1, gradients backward from k+1 to k.
//
// Push() blocks while the queue is full and Pop() while it is empty; Close() wakes every
// blocked caller at once, after which Push() returns false and Pop() returns
// std::nullopt (also for items still queued: closing means "abandon the run", which is
// how one failing stage stops all others without a deadlock).
//
// Example:
//   BoundedQueue<int> queue(/*capacity=*/2);
//   std::thread producer([&] { for (int i = 0; i < 5; ++i) if (!queue.Push(i)) return; });
//   while (std::optional<int> item = queue.Pop()) { if (*item == 4) break; }
//   queue.Close();
//   producer.join();
//
// Thread-safe: any number of producers and consumers.
#ifndef P3_PIPELINE_BOUNDED_QUEUE_H_
#define P3_PIPELINE_BOUNDED_QUEUE_H_

#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace p3::pipeline {

template <typename T>
class BoundedQueue {
 public:
  // `capacity` >= 1 items; a smaller value is taken as 1.
  explicit BoundedQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Appends `value`, waiting while the queue is full. Returns false (dropping `value`)
  // once the queue is closed.
  bool Push(T value) {
    absl::MutexLock lock(&mu_);
    Wait(&BoundedQueue::HasRoomOrClosed);
    if (closed_) return false;
    items_.push_back(std::move(value));
    return true;
  }

  // The oldest item, waiting while the queue is empty; std::nullopt once closed.
  std::optional<T> Pop() {
    absl::MutexLock lock(&mu_);
    Wait(&BoundedQueue::HasItemOrClosed);
    if (closed_) return std::nullopt;
    T value = std::move(items_.front());
    items_.pop_front();
    return value;
  }

  // Wakes all waiters; from now on Push() fails and Pop() returns std::nullopt.
  // Idempotent.
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    items_.clear();
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return items_.size();
  }

  size_t capacity() const { return capacity_; }

  // Threads waiting in Push() or Pop() right now.
  size_t blocked() const {
    absl::MutexLock lock(&mu_);
    return blocked_;
  }

  // Returns once at least `count` threads wait in Push() or Pop(), i.e. have found the
  // queue full (or empty) and released its lock: a deterministic handshake for tests of
  // what wakes them.
  void AwaitBlocked(size_t count) const {
    absl::MutexLock lock(&mu_);
    auto enough = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return blocked_ >= count; };
    mu_.Await(absl::Condition(&enough));
  }

 private:
  // Waits until `(this->*ready)()`, counted in blocked_ while it has to wait.
  void Wait(bool (BoundedQueue::*ready)() const) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if ((this->*ready)()) return;
    ++blocked_;
    mu_.Await(absl::Condition(this, ready));
    --blocked_;
  }

  bool HasRoomOrClosed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || items_.size() < capacity_;
  }
  bool HasItemOrClosed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || !items_.empty();
  }

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<T> items_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  size_t blocked_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace p3::pipeline

#endif  // P3_PIPELINE_BOUNDED_QUEUE_H_
