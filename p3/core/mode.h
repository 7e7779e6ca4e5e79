// The scheduling modes and what each one does. See docs/modes.md.
#ifndef P3_P3_CORE_MODE_H_
#define P3_P3_CORE_MODE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace p3 {

enum class Mode {
  kP3,                 // slices, priority order, updated values returned on the push
  kBaseline,           // MXNet's parameter server: whole tensors, FIFO, push/ack then pull
  kSlicingOnly,        // baseline with P3's slices
  kPriorityOnly,       // baseline with P3's priority order
  kValuesOnly,         // baseline with P3's updated values returned on the push (no pull)
  kNoOverlap,          // P3's transfers, but all communication between backward and forward
  kNoBackwardOverlap,  // P3, but gradients are queued only after the whole backward pass
  kNoForwardOverlap,   // P3, but the forward pass waits for every parameter, not per block
  kLocal,              // one process, no cluster: the plain libtorch training loop
};

// What a mode does, as independent switches.
struct ModeTraits {
  bool sliced = true;          // cut tensors into slices of slice_params (else whole tensors)
  bool priority = true;        // send highest priority first (else in the order ready)
  bool values_on_push = true;  // server returns updated values on the push (else ack + pull)
  // Queue each gradient as soon as autograd produces it (else all of them after the
  // whole backward pass).
  bool overlap_backward = true;
  // Forward block i waits only for its own parameters (else the forward pass waits for
  // every parameter before the first block).
  bool overlap_forward = true;
};

// The switches of `mode`, as in docs/modes.md's table. kLocal has no communication, so
// its switches mean nothing; it answers p3's.
ModeTraits TraitsOf(Mode mode);

// The names of the modes, indexed by Mode: the one list that configs, flags and
// messages use.
inline constexpr const char* kModeNames[] = {
    "p3",          "baseline",   "slicing_only",        "priority_only",
    "values_only", "no_overlap", "no_backward_overlap", "no_forward_overlap",
    "local"};

// kModeNames[mode], e.g. "slicing_only".
std::string ModeName(Mode mode);
absl::StatusOr<Mode> ParseMode(absl::string_view name);

}  // namespace p3

#endif  // P3_P3_CORE_MODE_H_
