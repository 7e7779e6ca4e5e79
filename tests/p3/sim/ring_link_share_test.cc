// gloo's measured link share in the ring's model (Calibration::ring_link_share): the
// interpolation between measured rates, its effect on a ring all-reduce, and the
// calibration file's field.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "p3/sim/sim_config.h"
#include "p3/sim/simulator.h"

namespace p3::sim {
namespace {

constexpr double kRate = 1.25e8;  // 1 Gbit/s in bytes/s

// One bucket of `values` float32 values, two workers on separate machines at `gbps`,
// no CPU costs or latency: the ring's time is its bytes over its link rate.
SimOptions OneBucket(int64_t values, double gbps) {
  SimOptions o;
  o.profile.model = "test";
  o.profile.batch = 1;
  o.profile.blocks.push_back({"b0", 0.0, 0.0, {values}});
  o.workers = 2;
  o.servers = 1;
  o.colocated = false;
  o.bandwidth_gbps = gbps;
  o.allreduce = true;
  o.first_bucket_bytes = o.bucket_bytes = int64_t{1} << 30;
  Calibration& c = o.calibration;
  c.latency_s = 0;
  c.goodput_factor = 0.957;
  c.shaped_s_per_byte_at_1g = 0;
  c.update_s_per_byte = 0;  // the optimizer step after the all-reduce
  c.ring_send_s_per_byte = c.ring_recv_s_per_byte = c.ring_reduce_s_per_byte = 0;
  o.iterations = 4;
  o.warmup_iterations = 1;
  return o;
}

CATCH_TEST_CASE("the ring's link share is goodput_factor until measured, then log-linear between rates") {
  Calibration c;
  c.goodput_factor = 0.957;
  CATCH_CHECK(RingLinkShare(c, 2.5) == 0.957);
  c.ring_link_share = {{1.0, 0.94}, {4.0, 0.84}};
  CATCH_CHECK(RingLinkShare(c, 1.0) == Approx(0.94));
  CATCH_CHECK(RingLinkShare(c, 2.0) == Approx(0.89));  // half way in log(rate)
  CATCH_CHECK(RingLinkShare(c, 4.0) == Approx(0.84));
  CATCH_CHECK(RingLinkShare(c, 0.5) == Approx(0.94));   // below the first: the first
  CATCH_CHECK(RingLinkShare(c, 25.0) == Approx(0.84));  // above the last: the last
}

CATCH_TEST_CASE("beside a computation the ring takes its own measured share, else the one alone") {
  Calibration c;
  c.goodput_factor = 0.957;
  CATCH_CHECK(RingLinkShare(c, 1.0, /*beside_compute=*/true) == 0.957);
  c.ring_link_share = {{1.0, 0.94}};
  CATCH_CHECK(RingLinkShare(c, 1.0, true) == Approx(0.94));  // none measured beside: alone's
  c.ring_link_share_beside_compute = {{1.0, 0.87}, {5.0, 0.72}};
  CATCH_CHECK(RingLinkShare(c, 1.0, true) == Approx(0.87));
  CATCH_CHECK(RingLinkShare(c, 5.0, true) == Approx(0.72));
  CATCH_CHECK(RingLinkShare(c, 1.0, false) == Approx(0.94));
}

CATCH_TEST_CASE("a ring all-reduce on a shaped link moves its bytes at the measured share of the rate") {
  const int64_t n = 1000000;
  SimOptions o = OneBucket(n, 1.0);
  absl::StatusOr<SimResult> before = Simulate(o);
  CATCH_REQUIRE(before.ok());
  CATCH_CHECK(before->iteration_seconds == Approx(4.0 * n / (kRate * 0.957)).epsilon(1e-9));
  o.calibration.ring_link_share = {{1.0, 0.8}};
  absl::StatusOr<SimResult> after = Simulate(o);
  CATCH_REQUIRE(after.ok());
  CATCH_CHECK(after->iteration_seconds == Approx(4.0 * n / (kRate * 0.8)).epsilon(1e-9));
  // Loopback is not a shaped link: the share does not apply there.
  SimOptions loop = OneBucket(n, 0);
  const double loop_before = Simulate(loop)->iteration_seconds;
  loop.calibration.ring_link_share = {{1.0, 0.5}};
  CATCH_CHECK(Simulate(loop)->iteration_seconds == Approx(loop_before).epsilon(1e-12));
}

CATCH_TEST_CASE("a calibration file gives ring_link_share by rate, and refuses a bad one") {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/ring_cal.json";
  std::ofstream(path) << R"({"ring_link_share": {"5": 0.84, "1": 0.94, "2.5": 0.9},
                             "ring_link_share_beside_compute": {"1": 0.87}})";
  Calibration c;
  CATCH_REQUIRE(LoadCalibration(path, &c).ok());
  CATCH_REQUIRE(c.ring_link_share_beside_compute.size() == 1);
  CATCH_CHECK(c.ring_link_share_beside_compute[0].second == 0.87);
  CATCH_REQUIRE(c.ring_link_share.size() == 3);
  CATCH_CHECK(c.ring_link_share[0].first == 1.0);  // sorted by rate
  CATCH_CHECK(c.ring_link_share[1].second == 0.9);
  CATCH_CHECK(c.ring_link_share[2].second == 0.84);
  for (const char* bad : {R"({"ring_link_share": 0.9})", R"({"ring_link_share": {"x": 0.9}})",
                          R"({"ring_link_share": {"1": 1.2}})", R"({"ring_link_share": {}})",
                          R"({"ring_link_share": {"0": 0.9}})",
                          R"({"ring_link_share_beside_compute": {"1": 0}})"}) {
    std::ofstream(path) << bad;
    absl::Status s = LoadCalibration(path, &c);
    CATCH_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CATCH_CHECK(std::string(s.message()).find("ring_link_share") != std::string::npos);
  }
}

}  // namespace
}  // namespace p3::sim
