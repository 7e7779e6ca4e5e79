#include "p3/core/mode.h"

#include <catch2/catch.hpp>
#include <iterator>
#include <string>

#include "absl/status/status.h"

namespace p3 {
namespace {

// docs/modes.md: slicing, order on the wire, the server's answer, gradients sent during
// backward, forward gated per block.
struct Row {
  Mode mode;
  bool sliced;
  bool priority;
  bool values_on_push;
  bool overlap_backward;
  bool overlap_forward;
};

constexpr Row kTable[] = {
    {Mode::kP3, true, true, true, true, true},
    {Mode::kBaseline, false, false, false, true, true},
    {Mode::kSlicingOnly, true, false, false, true, true},
    {Mode::kPriorityOnly, false, true, false, true, true},
    {Mode::kValuesOnly, false, false, true, true, true},
    {Mode::kNoOverlap, true, true, true, false, false},
    {Mode::kNoBackwardOverlap, true, true, true, false, true},
    {Mode::kNoForwardOverlap, true, true, true, true, false},
    // No communication: the switches mean nothing; p3's are given.
    {Mode::kLocal, true, true, true, true, true},
};

CATCH_TEST_CASE("each mode has the five switches docs/modes.md gives it") {
  CATCH_REQUIRE(std::size(kTable) == std::size(kModeNames));
  for (const Row& row : kTable) {
    CATCH_CAPTURE(ModeName(row.mode));
    const ModeTraits traits = TraitsOf(row.mode);
    CATCH_CHECK(traits.sliced == row.sliced);
    CATCH_CHECK(traits.priority == row.priority);
    CATCH_CHECK(traits.values_on_push == row.values_on_push);
    CATCH_CHECK(traits.overlap_backward == row.overlap_backward);
    CATCH_CHECK(traits.overlap_forward == row.overlap_forward);
  }
}

CATCH_TEST_CASE("each ablation mode differs from its reference in exactly one switch") {
  auto differences = [](Mode a, Mode b) {
    const ModeTraits x = TraitsOf(a);
    const ModeTraits y = TraitsOf(b);
    return (x.sliced != y.sliced) + (x.priority != y.priority) +
           (x.values_on_push != y.values_on_push) + (x.overlap_backward != y.overlap_backward) +
           (x.overlap_forward != y.overlap_forward);
  };
  // Each of P3's ingredients added to the baseline alone...
  for (Mode mode : {Mode::kSlicingOnly, Mode::kPriorityOnly, Mode::kValuesOnly}) {
    CATCH_CAPTURE(ModeName(mode));
    CATCH_CHECK(differences(mode, Mode::kBaseline) == 1);
  }
  // ...and each overlap taken out of P3 alone.
  for (Mode mode : {Mode::kNoBackwardOverlap, Mode::kNoForwardOverlap}) {
    CATCH_CAPTURE(ModeName(mode));
    CATCH_CHECK(differences(mode, Mode::kP3) == 1);
  }
  CATCH_CHECK(differences(Mode::kNoOverlap, Mode::kP3) == 2);
}

CATCH_TEST_CASE("every mode name parses back to its mode") {
  for (size_t i = 0; i < std::size(kModeNames); ++i) {
    CATCH_CAPTURE(kModeNames[i]);
    absl::StatusOr<Mode> parsed = ParseMode(kModeNames[i]);
    CATCH_REQUIRE(parsed.ok());
    CATCH_CHECK(static_cast<size_t>(*parsed) == i);
    CATCH_CHECK(ModeName(*parsed) == kModeNames[i]);
  }
  CATCH_CHECK(ModeName(Mode::kSlicingOnly) == "slicing_only");
}

CATCH_TEST_CASE("an unknown mode name is refused naming it and every allowed one") {
  for (const char* bad : {"P3", "pipeline", "", "slicing-only"}) {
    CATCH_CAPTURE(bad);
    absl::StatusOr<Mode> parsed = ParseMode(bad);
    CATCH_REQUIRE_FALSE(parsed.ok());
    CATCH_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    const std::string message(parsed.status().message());
    CATCH_CHECK(message.find(std::string("\"") + bad + "\"") != std::string::npos);
    for (const char* allowed : kModeNames) {
      CATCH_CHECK(message.find(allowed) != std::string::npos);
    }
  }
}

}  // namespace
}  // namespace p3
