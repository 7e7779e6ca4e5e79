#include "p3/core/mode.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3 {

ModeTraits TraitsOf(Mode mode) {
  ModeTraits t;  // p3's: every switch on
  switch (mode) {
    case Mode::kP3:
    case Mode::kLocal:
      break;
    case Mode::kBaseline:
      t.sliced = t.priority = t.values_on_push = false;
      break;
    case Mode::kSlicingOnly:
      t.priority = t.values_on_push = false;
      break;
    case Mode::kPriorityOnly:
      t.sliced = t.values_on_push = false;
      break;
    case Mode::kValuesOnly:
      t.sliced = t.priority = false;
      break;
    case Mode::kNoOverlap:
      t.overlap_backward = t.overlap_forward = false;
      break;
    case Mode::kNoBackwardOverlap:
      t.overlap_backward = false;
      break;
    case Mode::kNoForwardOverlap:
      t.overlap_forward = false;
      break;
  }
  return t;
}

std::string ModeName(Mode mode) {
  const size_t index = static_cast<size_t>(mode);
  return index < std::size(kModeNames) ? kModeNames[index] : "unknown";
}

absl::StatusOr<Mode> ParseMode(absl::string_view name) {
  for (size_t i = 0; i < std::size(kModeNames); ++i) {
    if (name == kModeNames[i]) return static_cast<Mode>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("mode: unknown mode \"", name,
                                                 "\"; allowed: ", absl::StrJoin(kModeNames, ", ")));
}

}  // namespace p3
