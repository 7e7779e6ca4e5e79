// The worker's side of averaging the model's buffers (docs/protocol.md, "Buffers";
// Worker::AverageBuffers): the round this worker awaits, and server 0's mean of every
// worker's buffers once it arrives. The model's tensors stay with the Worker; this holds
// only the floats.
//
// Example:
//   exchange.Expect(round);                                   // training thread
//   transport->Send(... Upstream{.kind = kBuffers, .round = round, .buffers = mine} ...);
//   exchange.Arrived(server, round, bytes);                   // a transport's thread
//   absl::StatusOr<std::vector<float>> mean = exchange.Await(absl::Seconds(60));
//
// Thread-safe.
#ifndef P3_WORKER_BUFFER_EXCHANGE_H_
#define P3_WORKER_BUFFER_EXCHANGE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace p3 {

class BufferExchange {
 public:
  // Worker `rank`'s exchange (for the messages).
  explicit BufferExchange(int rank) : rank_(rank) {}

  // Round `round` begins: its mean is awaited (any earlier one is forgotten).
  void Expect(uint64_t round);

  // What server `server` sent: the mean of round `round` as raw float32 bytes. Anything
  // but server 0's mean of the round awaited, once, is refused (Internal) and changes
  // nothing.
  absl::Status Arrived(int server, uint64_t round, absl::string_view values);

  // Waits up to `bound` for the mean of the round expected and takes it. DeadlineExceeded
  // naming the round, or the status given to Abort().
  absl::StatusOr<std::vector<float>> Await(absl::Duration bound);

  // Wakes the wait, now and later, with `status` (not OK). The first call wins.
  void Abort(const absl::Status& status);

 private:
  const int rank_;
  absl::Mutex mu_;
  // The round awaited (UINT64_MAX: none), and its mean once server 0 has sent it.
  uint64_t round_ ABSL_GUARDED_BY(mu_) = UINT64_MAX;
  std::optional<std::vector<float>> mean_ ABSL_GUARDED_BY(mu_);
  absl::Status abort_ ABSL_GUARDED_BY(mu_);
};

}  // namespace p3

#endif  // P3_WORKER_BUFFER_EXCHANGE_H_
