// The kernel's send buffer in the simulator (p3/sim/connections.cc): a write completes
// once its last byte is in the buffer, i.e. when the bytes not yet on the wire, its own
// included, fit Calibration::kernel_buffer_bytes (issue 36: the classic parameter
// server's whole tensors on fast links).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "p3/base/json_file.h"
#include "p3/core/mode.h"
#include "p3/sim/simulator.h"
#include "tests/p3/sim/ideal_calibration.h"

namespace p3::sim {
namespace {

constexpr double kRate = 1.25e8;  // 1 Gbit/s in bytes/s
constexpr int64_t kMiB = 1 << 20;

// The baseline (whole tensors, FIFO) on one worker and one server on two machines: one
// block per tensor, no compute time, so every gradient is queued at time 0, the last
// block's first.
SimOptions Baseline(const std::vector<int64_t>& tensors) {
  SimOptions o;
  for (size_t i = 0; i < tensors.size(); ++i) {
    o.profile.blocks.push_back({"b" + std::to_string(i), 0.0, 0.0, {tensors[i]}});
  }
  o.profile.model = "test";
  o.profile.batch = 1;
  o.mode = Mode::kBaseline;
  o.workers = o.servers = 1;
  o.colocated = false;
  o.bandwidth_gbps = 1.0;
  o.calibration = IdealCalibration();
  o.calibration.kernel_buffer_bytes = kMiB;
  o.iterations = 2;
  o.warmup_iterations = 1;
  o.trace = true;
  return o;
}

// When the worker's writes of iteration 0's gradients completed (the end of each trace
// event "gradient <slice>" on its send track), by slice id, in seconds (whole
// microseconds: compare with a margin of 2 us).
std::map<int, double> GradientWritesDone(SimResult& r) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/kernel_worker0.json";
  CATCH_REQUIRE(r.traces[0]->WriteJson(path).ok());
  absl::StatusOr<nlohmann::json> j = ReadJsonFile(path);
  CATCH_REQUIRE(j.ok());
  std::map<int, double> done;
  for (const nlohmann::json& e : (*j)["traceEvents"]) {
    if (e.value("cat", "") != "send") continue;
    if (e.value("name", "").rfind("gradient ", 0) != 0) continue;
    if (e["args"]["iteration"].get<int>() != 0) continue;
    done[e["args"]["slice"].get<int>()] =
        (e["ts"].get<double>() + e["dur"].get<double>()) * 1e-6;
  }
  return done;
}

CATCH_TEST_CASE("a write behind a large message completes once the unsent bytes fit, "
                "not once the large message has left") {
  // Tensor 1 (2 MiB) is produced first, tensor 0 (64 KiB) right after it; the buffer
  // holds 1 MiB. The large write waits until 1 MiB of it is on the wire; the small one
  // until its 64 KiB fit behind the rest: 64 KiB later. (Before issue 36's fix the large
  // write completed at once, alone in the buffer, and the small one only once the whole
  // 2 MiB had left: the writer then sat idle while the wire drained the buffer empty.)
  SimOptions o = Baseline({16384, 2 * kMiB / 4});
  absl::StatusOr<SimResult> r = Simulate(o);
  CATCH_INFO(r.status().message());
  CATCH_REQUIRE(r.ok());
  const std::map<int, double> done = GradientWritesDone(*r);
  CATCH_REQUIRE(done.size() == 2);
  CATCH_CHECK(done.at(1) == Approx(1.0 * kMiB / kRate).margin(2e-6));
  CATCH_CHECK(done.at(0) == Approx((1.0 * kMiB + 64 * 1024) / kRate).margin(2e-6));
}

CATCH_TEST_CASE("messages that fit the kernel buffer together are written at once") {
  // 256 KiB and 512 KiB in a 1 MiB buffer: both writes complete at time 0.
  SimOptions o = Baseline({128 * 1024 / 4, 256 * 1024 / 4});
  o.calibration.kernel_buffer_bytes = kMiB;
  absl::StatusOr<SimResult> r = Simulate(o);
  CATCH_REQUIRE(r.ok());
  const std::map<int, double> done = GradientWritesDone(*r);
  CATCH_REQUIRE(done.size() == 2);
  CATCH_CHECK(done.at(0) == 0.0);
  CATCH_CHECK(done.at(1) == 0.0);
  // With a 256 KiB buffer the first still fits alone; the 128 KiB behind it wait until
  // 128 KiB of it have left.
  o.calibration.kernel_buffer_bytes = 256 * 1024;
  absl::StatusOr<SimResult> small = Simulate(o);
  CATCH_REQUIRE(small.ok());
  const std::map<int, double> waited = GradientWritesDone(*small);
  CATCH_CHECK(waited.at(1) == 0.0);
  CATCH_CHECK(waited.at(0) == Approx(128.0 * 1024 / kRate).margin(2e-6));
}

}  // namespace
}  // namespace p3::sim
