#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/launcher/progress_display.h"

namespace p3::tools::launcher {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return (fs::path(tmp != nullptr ? tmp : "/tmp") / name).string();
}

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app | std::ios::binary) << text;
}

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

CATCH_TEST_CASE("the follower returns each PROGRESS line once, when its newline has arrived") {
  const std::string log = TempPath("worker_0.log");
  fs::remove(log);
  LogFollower follower(log);
  CATCH_CHECK(follower.ReadNewProgress().empty());  // No file yet.

  Append(log, "connected to 2 servers\nPROGRESS iteration=1 total=4 loss=2.5\nPROGRESS itera");
  std::vector<ProgressLine> first = follower.ReadNewProgress();
  CATCH_REQUIRE(first.size() == 1);
  CATCH_CHECK(first[0].iteration == 1);
  CATCH_CHECK(first[0].total == 4);

  Append(log, "tion=2 total=4 loss=2 samples_per_second=90\nPROGRESS iteration=x\n");
  std::vector<ProgressLine> second = follower.ReadNewProgress();
  CATCH_REQUIRE(second.size() == 1);
  CATCH_CHECK(second[0].iteration == 2);
  CATCH_REQUIRE(second[0].samples_per_second.has_value());
  CATCH_CHECK(*second[0].samples_per_second == 90);
  CATCH_CHECK(follower.ReadNewProgress().empty());
}

CATCH_TEST_CASE("plain output: one line per PROGRESS line, rates and traffic when present") {
  std::ostringstream out;
  ProgressDisplay::Options options;
  options.out = &out;
  ProgressDisplay display(options);
  ProgressLine full;
  full.iteration = 4;
  full.total = 12;
  full.loss = 0.5;
  full.samples_per_second = 6400;
  full.sent_mbps = 250;
  full.received_mbps = 2410;
  ProgressLine bare;
  bare.iteration = 5;
  bare.total = 12;
  bare.loss = 0.25;
  display.Show({full, bare}, kStart + absl::Seconds(3), kStart);
  display.Show({}, kStart + absl::Seconds(9), kStart);  // Nothing new: nothing printed.
  CATCH_CHECK(out.str() ==
              "[p3] iter 4/12  loss 0.5  6400 samples/s  sent 250 Mbit/s  received 2.41 Gbit/s  "
              "elapsed 3s\n"
              "[p3] iter 5/12  loss 0.25  elapsed 3s\n");
  display.Say("done");
  CATCH_CHECK(out.str().substr(out.str().size() - 10) == "[p3] done\n");
}

CATCH_TEST_CASE("live output: one line redrawn, at most once a second without news") {
  std::ostringstream out;
  ProgressDisplay::Options options;
  options.out = &out;
  options.live = true;
  ProgressDisplay display(options);
  display.Show({}, kStart + absl::Seconds(2), kStart);
  CATCH_CHECK(out.str() == "\r\033[K[p3] waiting for rank 0's first progress line  elapsed 2s");
  display.Show({}, kStart + absl::Milliseconds(2500), kStart);  // Too soon: no redraw.
  CATCH_CHECK(out.str() == "\r\033[K[p3] waiting for rank 0's first progress line  elapsed 2s");

  out.str("");
  ProgressLine line;
  line.iteration = 1;
  line.total = 2;
  line.loss = 1;
  display.Show({line}, kStart + absl::Milliseconds(2600), kStart);  // News: drawn at once.
  CATCH_CHECK(out.str() == "\r\033[K[p3] iter 1/2  loss 1  elapsed 2s");

  out.str("");
  display.Say("server 0 exited");  // Clears the progress line first.
  CATCH_CHECK(out.str() == "\r\033[K[p3] server 0 exited\n");

  out.str("");
  display.Show({}, kStart + absl::Seconds(4), kStart);  // The latest line, elapsed updated.
  display.Finish();
  display.Finish();  // Nothing left to end.
  CATCH_CHECK(out.str() == "\r\033[K[p3] iter 1/2  loss 1  elapsed 4s\n");
}

CATCH_TEST_CASE("every worker's iteration ends the progress line, by rank") {
  CATCH_CHECK(FormatWorkerIterations({}) == "");
  CATCH_CHECK(FormatWorkerIterations({7}) == "");  // One worker: the line says it already.
  CATCH_CHECK(FormatWorkerIterations({12, 11}) == "  workers 12 11");
  CATCH_CHECK(FormatWorkerIterations({3, 3, 3, 3, 3, 3, 3, 0}) == "  workers 3 3 3 3 3 3 3 0");
  // More than eight: the range, and the rank furthest behind.
  CATCH_CHECK(FormatWorkerIterations({12, 12, 12, 10, 12, 11, 12, 12, 12}) ==
              "  workers 10..12, behind: rank 3 at 10");
  CATCH_CHECK(FormatWorkerIterations(std::vector<int64_t>(9, 5)) == "  workers 5..5");

  ProgressLine line;
  line.iteration = 4;
  line.total = 12;
  line.loss = 0.5;
  line.samples_per_second = 6400;
  CATCH_CHECK(FormatProgress(line, absl::Seconds(3), {4, 2}) ==
              "[p3] iter 4/12  loss 0.5  6400 samples/s  elapsed 3s  workers 4 2");

  std::ostringstream out;
  ProgressDisplay::Options options;
  options.out = &out;
  ProgressDisplay plain(options);
  plain.Show({line}, kStart + absl::Seconds(1), kStart, {4, 3});
  CATCH_CHECK(out.str() == "[p3] iter 4/12  loss 0.5  6400 samples/s  elapsed 1s  workers 4 3\n");

  out.str("");
  options.live = true;
  ProgressDisplay live(options);
  live.Show({}, kStart + absl::Seconds(2), kStart, {0, 1});  // Rank 1 reported first.
  CATCH_CHECK(out.str() ==
              "\r\033[K[p3] waiting for rank 0's first progress line  elapsed 2s  workers 0 1");
}

CATCH_TEST_CASE("rates above 1000 Mbit/s are shown in Gbit/s") {
  CATCH_CHECK(FormatMbps(812.4) == "812 Mbit/s");
  CATCH_CHECK(FormatMbps(999.4) == "999 Mbit/s");
  CATCH_CHECK(FormatMbps(2410) == "2.41 Gbit/s");
}

}  // namespace
}  // namespace p3::tools::launcher
