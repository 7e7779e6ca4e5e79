#include "p3/mode.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace p3 {

ModeTraits TraitsOf(Mode mode) {
  switch (mode) {
    case Mode::kP3:
    case Mode::kLocal:
      return {.sliced = true, .priority = true, .values_on_push = true, .overlap = true};
    case Mode::kBaseline:
      return {.sliced = false, .priority = false, .values_on_push = false, .overlap = true};
    case Mode::kSlicingOnly:
      return {.sliced = true, .priority = false, .values_on_push = false, .overlap = true};
    case Mode::kPriorityOnly:
      return {.sliced = false, .priority = true, .values_on_push = false, .overlap = true};
    case Mode::kNoOverlap:
      return {.sliced = true, .priority = true, .values_on_push = true, .overlap = false};
  }
  return {};
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
