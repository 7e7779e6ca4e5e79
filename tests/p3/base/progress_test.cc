#include "p3/base/progress.h"

#include <catch2/catch.hpp>

namespace p3 {
namespace {

CATCH_TEST_CASE("a formatted progress line parses back to the same fields") {
  ProgressLine p;
  p.iteration = 20;
  p.total = 100;
  p.loss = 1.25;
  p.samples_per_second = 512.5;
  p.sent_mbps = 800.0;
  p.received_mbps = 790.5;
  const std::string line = FormatProgressLine(p);
  CATCH_CHECK(line ==
              "PROGRESS iteration=20 total=100 loss=1.2500 samples_per_second=512.5 "
              "sent_mbps=800.0 received_mbps=790.5");
  const std::optional<ProgressLine> back = ParseProgressLine(line);
  CATCH_REQUIRE(back.has_value());
  CATCH_CHECK(back->iteration == 20);
  CATCH_CHECK(back->total == 100);
  CATCH_CHECK(back->loss == 1.25);
  CATCH_CHECK(back->samples_per_second == 512.5);
  CATCH_CHECK(back->sent_mbps == 800.0);
  CATCH_CHECK(back->received_mbps == 790.5);
}

CATCH_TEST_CASE("optional progress fields are left out when unset and absent when parsed") {
  ProgressLine p;
  p.iteration = 3;
  p.total = 9;
  p.loss = 0.5;
  const std::string line = FormatProgressLine(p);
  CATCH_CHECK(line == "PROGRESS iteration=3 total=9 loss=0.5000");
  const std::optional<ProgressLine> back = ParseProgressLine(line);
  CATCH_REQUIRE(back.has_value());
  CATCH_CHECK_FALSE(back->samples_per_second.has_value());
  CATCH_CHECK_FALSE(back->sent_mbps.has_value());
}

CATCH_TEST_CASE("progress parsing ignores unknown fields and refuses incomplete lines") {
  CATCH_CHECK(ParseProgressLine("PROGRESS iteration=1 total=2 loss=3 colour=blue").has_value());
  CATCH_CHECK_FALSE(ParseProgressLine("PROGRESS iteration=1 total=2").has_value());
  CATCH_CHECK_FALSE(ParseProgressLine("PROGRESS iteration=x total=2 loss=3").has_value());
  CATCH_CHECK_FALSE(ParseProgressLine("EPOCH iteration=1 total=2 loss=3").has_value());
  CATCH_CHECK_FALSE(ParseProgressLine("").has_value());
}

}  // namespace
}  // namespace p3
