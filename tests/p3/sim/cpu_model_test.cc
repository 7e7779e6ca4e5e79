// The simulator's CPU model on shared cores (p3/sim/cpu_model.cc): how communication
// beside computations is charged to them.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "p3/core/mode.h"
#include "p3/sim/simulator.h"

namespace p3::sim {
namespace {

// Two workers on one host, their servers on another; no CPU cost but sending (1 ns a
// byte). Backward: block 1 (0.2 s) on both workers at once, whose 4 MB gradients are
// then written (4 ms of CPU each) while block 0's backward (0.2 s) computes on both.
SimOptions TwoWorkersOnOneHost(double cores) {
  const int64_t n = 1000000;
  SimOptions o;
  o.profile.model = "test";
  o.profile.batch = 1;
  o.profile.blocks = {{"b0", 0.0, 0.2, {n}}, {"b1", 0.0, 0.2, {n}}};
  o.mode = Mode::kP3;
  o.workers = o.servers = 2;
  o.colocated = false;  // workers on machines 0, 1 (host 0), servers on 2, 3 (host 1)
  o.machines_per_host = 2;
  o.cpu_cores_per_host = cores;
  o.bandwidth_gbps = 0;
  Calibration& c = o.calibration;
  c.send_s_per_byte = 1e-9;
  c.recv_s_per_byte = c.shaped_s_per_byte_at_1g = c.per_message_s = c.write_gap_s = 0;
  c.shm_s_per_byte = c.update_s_per_byte = 0;
  c.header_bytes = 0;
  c.latency_s = 0;
  c.preempt_s = 0;
  o.iterations = 4;
  o.warmup_iterations = 1;
  return o;
}

CATCH_TEST_CASE("two computations on two cores share one charge of interference per communication core-second") {
  SimOptions o = TwoWorkersOnOneHost(2);
  o.calibration.comm_interference = 0.5;
  absl::StatusOr<SimResult> two_cores = Simulate(o);
  CATCH_REQUIRE(two_cores.ok());
  // Each block-1 gradient's 4 ms write has one core beside it, where the two
  // computations take turns: 0.5 x 4 ms per write in all, two writes an iteration (and
  // a little more: a block-0 write starts while the other worker still computes).
  CATCH_CHECK(two_cores->cpu.interference_s == Approx(2 * 0.5 * 4e-3).epsilon(0.05));
  // With a core for each computation beside the writer, each loses the full charge: the
  // two block-1 writes cost twice as much (a write beside one computation, the same).
  o.cpu_cores_per_host = 3;
  absl::StatusOr<SimResult> three_cores = Simulate(o);
  CATCH_REQUIRE(three_cores.ok());
  CATCH_CHECK(three_cores->cpu.interference_s - two_cores->cpu.interference_s ==
              Approx(2 * 0.5 * 4e-3).epsilon(0.01));
  // One core: nothing runs beside the writer (it preempts instead, preempt_s).
  o.cpu_cores_per_host = 1;
  absl::StatusOr<SimResult> one_core = Simulate(o);
  CATCH_REQUIRE(one_core.ok());
  CATCH_CHECK(one_core->cpu.interference_s == 0);
}

}  // namespace
}  // namespace p3::sim
