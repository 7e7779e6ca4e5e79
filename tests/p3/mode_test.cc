#include "p3/mode.h"

#include <catch2/catch.hpp>
#include <iterator>
#include <string>

#include "absl/status/status.h"

namespace p3 {
namespace {

// docs/modes.md: slicing, order on the wire, the server's answer, overlap.
struct Row {
  Mode mode;
  bool sliced;
  bool priority;
  bool values_on_push;
  bool overlap;
};

constexpr Row kTable[] = {
    {Mode::kP3, true, true, true, true},
    {Mode::kBaseline, false, false, false, true},
    {Mode::kSlicingOnly, true, false, false, true},
    {Mode::kPriorityOnly, false, true, false, true},
    {Mode::kNoOverlap, true, true, true, false},
    // No communication: the switches mean nothing; p3's are given.
    {Mode::kLocal, true, true, true, true},
};

CATCH_TEST_CASE("each mode has the four switches docs/modes.md gives it") {
  CATCH_REQUIRE(std::size(kTable) == std::size(kModeNames));
  for (const Row& row : kTable) {
    CATCH_CAPTURE(ModeName(row.mode));
    const ModeTraits traits = TraitsOf(row.mode);
    CATCH_CHECK(traits.sliced == row.sliced);
    CATCH_CHECK(traits.priority == row.priority);
    CATCH_CHECK(traits.values_on_push == row.values_on_push);
    CATCH_CHECK(traits.overlap == row.overlap);
  }
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
