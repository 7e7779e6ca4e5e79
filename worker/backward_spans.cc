#include "worker/backward_spans.h"

namespace p3 {

void BackwardSpans::Begin(absl::Time now) {
  block_ = -1;
  start_ = now;
  last_ = now;
}

std::optional<BackwardSpans::Span> BackwardSpans::OnGradient(int block, absl::Time now) {
  std::optional<Span> done;
  if (block != block_) {
    if (block_ >= 0) {
      done = Span{block_, start_, last_};
      start_ = last_;
    }
    block_ = block;
  }
  last_ = now;
  return done;
}

std::optional<BackwardSpans::Span> BackwardSpans::End(absl::Time now) {
  if (block_ < 0) return std::nullopt;
  const Span done{block_, start_, now};
  block_ = -1;
  start_ = now;
  last_ = now;
  return done;
}

}  // namespace p3
