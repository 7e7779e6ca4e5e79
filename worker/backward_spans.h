// The backward pass's spans on a worker's `compute` track, one per block, each named by
// the block whose gradients it computed (docs/tracing.md).
//
// Autograd hands a block's gradients out over the block's backward: its last layer's
// first, almost at once, its first layer's at the end. A span therefore ends at its
// block's last gradient and the next begins there; the first begins with the pass and
// the last ends with it, so the spans tile the pass. (Named by the block that begins
// them instead, each would hold the previous block's work.)
//
// Example:
//   BackwardSpans spans;
//   spans.Begin(absl::Now());
//   // in each gradient's hook, on the training thread:
//   if (auto span = spans.OnGradient(block_of[t], absl::Now())) Record(*span);
//   // after the pass:
//   if (auto span = spans.End(absl::Now())) Record(*span);
//
// Not thread-safe: the training thread owns it.
#ifndef P3_WORKER_BACKWARD_SPANS_H_
#define P3_WORKER_BACKWARD_SPANS_H_

#include <optional>

#include "absl/time/time.h"

namespace p3 {

class BackwardSpans {
 public:
  struct Span {
    int block;
    absl::Time start;
    absl::Time end;
  };

  // A pass starts: the first span begins now.
  void Begin(absl::Time now);
  // A gradient of `block` exists now. The span of the block before it, if this is the
  // first gradient of another block.
  std::optional<Span> OnGradient(int block, absl::Time now);
  // The pass has ended: the last block's span, ending now; none if no gradient came.
  std::optional<Span> End(absl::Time now);

 private:
  int block_ = -1;         // the block of the last gradient
  absl::Time start_;       // where its span began
  absl::Time last_;        // its last gradient so far
};

}  // namespace p3

#endif  // P3_WORKER_BACKWARD_SPANS_H_
