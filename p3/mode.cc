#include "p3/mode.h"

#include "absl/strings/str_cat.h"

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
  switch (mode) {
    case Mode::kP3: return "p3";
    case Mode::kBaseline: return "baseline";
    case Mode::kSlicingOnly: return "slicing_only";
    case Mode::kPriorityOnly: return "priority_only";
    case Mode::kNoOverlap: return "no_overlap";
    case Mode::kLocal: return "local";
  }
  return "unknown";
}

absl::StatusOr<Mode> ParseMode(absl::string_view name) {
  for (Mode m : {Mode::kP3, Mode::kBaseline, Mode::kSlicingOnly, Mode::kPriorityOnly,
                 Mode::kNoOverlap, Mode::kLocal}) {
    if (name == ModeName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "mode: unknown mode \"", name,
      "\"; allowed: p3, baseline, slicing_only, priority_only, no_overlap, local"));
}

}  // namespace p3
