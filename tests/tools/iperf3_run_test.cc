// ParseIperf3Report on iperf3 3.12's own -J reports (testdata/: a 1 s run on loopback,
// one way and --bidir, recorded with `iperf3 -c 127.0.0.1 -t 1 -J [--bidir]`), and on
// reports it must refuse; an Iperf3Result's host CPU per GB. Running iperf3 itself is
// bench_streaming_test's.
#include "tools/iperf3_run.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "p3/base/file_util.h"

namespace p3::tools {
namespace {

std::string TestData(const std::string& name) {
  absl::StatusOr<std::string> text = ReadFile("tests/tools/testdata/" + name);
  CATCH_REQUIRE(text.ok());
  return *text;
}

CATCH_TEST_CASE("iperf3 --bidir report: both directions' received bytes and rates, each its own") {
  absl::StatusOr<Iperf3Result> r =
      ParseIperf3Report(TestData("iperf3_bidir_loopback_1s.json"), /*bidir=*/true);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->bidir);
  // end.sum_received: client -> server; end.sum_received_bidir_reverse: server -> client.
  CATCH_CHECK(r->bytes == 924057600);
  CATCH_CHECK(r->gbps == Approx(7.350547975444017));
  CATCH_CHECK(r->reverse_bytes == 1106378752);
  CATCH_CHECK(r->reverse_gbps == Approx(8.800847583081270));
  CATCH_CHECK(r->total_bytes() == 924057600 + 1106378752);
  CATCH_CHECK(r->seconds == Approx(1.005702));
  CATCH_CHECK(r->sender_cpu_percent == Approx(30.412794759347978));
  CATCH_CHECK(r->receiver_cpu_percent == Approx(34.048316018900046));
  CATCH_CHECK(r->host.busy_ticks == 0);  // The host's CPU is RunIperf3's, not in the report.
}

CATCH_TEST_CASE("one-way iperf3 report: one direction, nothing in reverse") {
  absl::StatusOr<Iperf3Result> r =
      ParseIperf3Report(TestData("iperf3_loopback_1s.json"), /*bidir=*/false);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK_FALSE(r->bidir);
  CATCH_CHECK(r->bytes == 2392064000);
  CATCH_CHECK(r->gbps == Approx(19.127770608831764));
  CATCH_CHECK(r->reverse_bytes == 0);
  CATCH_CHECK(r->reverse_gbps == 0);
  CATCH_CHECK(r->total_bytes() == 2392064000);
  CATCH_CHECK(r->sender_cpu_percent == Approx(45.06547941756868));
}

CATCH_TEST_CASE("a one-way report read as --bidir is refused, naming the missing part") {
  absl::StatusOr<Iperf3Result> r =
      ParseIperf3Report(TestData("iperf3_loopback_1s.json"), /*bidir=*/true);
  CATCH_REQUIRE_FALSE(r.ok());
  CATCH_CHECK(absl::StrContains(r.status().message(), "sum_received_bidir_reverse"));
}

CATCH_TEST_CASE("a --bidir report read as one way gives its forward direction only") {
  absl::StatusOr<Iperf3Result> r =
      ParseIperf3Report(TestData("iperf3_bidir_loopback_1s.json"), /*bidir=*/false);
  CATCH_REQUIRE(r.ok());
  CATCH_CHECK(r->bytes == 924057600);
  CATCH_CHECK(r->reverse_bytes == 0);
}

CATCH_TEST_CASE("reports with no bytes, an error instead of figures, or no JSON are refused") {
  const std::string cpu = R"("cpu_utilization_percent": {"host_total": 1.0, "remote_total": 1.0})";
  const std::string none = R"({"bytes": 0, "bits_per_second": 0, "seconds": 1})";
  const std::string some = R"({"bytes": 10, "bits_per_second": 80, "seconds": 1})";
  CATCH_CHECK_FALSE(
      ParseIperf3Report(R"({"end": {"sum_received": )" + none + ", " + cpu + "}}", false).ok());
  CATCH_CHECK_FALSE(ParseIperf3Report(R"({"end": {"sum_received": )" + some +
                                          R"(, "sum_received_bidir_reverse": )" + none + ", " +
                                          cpu + "}}",
                                      true)
                        .ok());
  CATCH_CHECK(ParseIperf3Report(R"({"end": {"sum_received": )" + some +
                                    R"(, "sum_received_bidir_reverse": )" + some + ", " + cpu +
                                    "}}",
                                true)
                  .ok());
  // What iperf3 -J writes when it cannot connect: no "end" figures.
  CATCH_CHECK_FALSE(
      ParseIperf3Report(
          R"({"start": {}, "intervals": [], "end": {}, "error": "unable to connect"})", false)
          .ok());
  CATCH_CHECK_FALSE(ParseIperf3Report("iperf3: error - unable to connect", false).ok());
}

CATCH_TEST_CASE("host CPU per GB: busy seconds over both directions' bytes, 0 without a tick") {
  Iperf3Result r;
  r.bytes = 2'000'000'000;
  r.reverse_bytes = 2'000'000'000;
  r.host.busy_ticks = 2 * sysconf(_SC_CLK_TCK);  // 2 s of the host's CPU
  CATCH_CHECK(r.host_cpu_s_per_gb() == Approx(0.5));
  r.reverse_bytes = 0;  // one way
  CATCH_CHECK(r.host_cpu_s_per_gb() == Approx(1.0));
  r.host.busy_ticks = 0;
  CATCH_CHECK(r.host_cpu_s_per_gb() == 0);
  r.host.busy_ticks = 100;
  r.bytes = 0;
  CATCH_CHECK(r.host_cpu_s_per_gb() == 0);
}

}  // namespace
}  // namespace p3::tools
