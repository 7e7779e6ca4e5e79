// The simulator's CPU model on shared cores (p3/sim/cpu_model.cc): how communication
// beside computations is charged to them.
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
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

CATCH_TEST_CASE("on a shaped link a large message wakes its thread once per shaped_bytes_per_wake bytes") {
  // Both cores of the workers' host compute block 0 while block 1's gradients (slices of
  // 40,000 values, 160 kB messages) are written: each wake-up costs preempt_s.
  SimOptions o = TwoWorkersOnOneHost(2);
  o.bandwidth_gbps = 10;  // the workers and servers on different machines: a shaped link
  o.calibration.preempt_s = 100e-6;
  absl::StatusOr<SimResult> per_message = Simulate(o);  // shaped_bytes_per_wake 0: off
  CATCH_REQUIRE(per_message.ok());
  CATCH_REQUIRE(per_message->cpu.preempt_s > 0);
  // 40 kB per wake-up: four wake-ups for each 160 kB message, four times the charge
  // (within what the longer computation changes of when the writes fall).
  o.calibration.shaped_bytes_per_wake = 40000;
  absl::StatusOr<SimResult> per_bytes = Simulate(o);
  CATCH_REQUIRE(per_bytes.ok());
  CATCH_CHECK(per_bytes->cpu.preempt_s > 2.5 * per_message->cpu.preempt_s);
  CATCH_CHECK(per_bytes->iteration_seconds > per_message->iteration_seconds);
  // Messages shorter than W still wake their thread once: the charge is unchanged.
  o.calibration.shaped_bytes_per_wake = 1e9;
  absl::StatusOr<SimResult> at_least_one = Simulate(o);
  CATCH_REQUIRE(at_least_one.ok());
  CATCH_CHECK(at_least_one->cpu.preempt_s == per_message->cpu.preempt_s);
  CATCH_CHECK(at_least_one->iteration_seconds == per_message->iteration_seconds);
  // On loopback (no rate) one wake-up a message, whatever W.
  o.bandwidth_gbps = 0;
  o.calibration.shaped_bytes_per_wake = 0;
  absl::StatusOr<SimResult> loopback_off = Simulate(o);
  o.calibration.shaped_bytes_per_wake = 40000;
  absl::StatusOr<SimResult> loopback_on = Simulate(o);
  CATCH_REQUIRE(loopback_off.ok());
  CATCH_REQUIRE(loopback_on.ok());
  CATCH_CHECK(loopback_on->cpu.preempt_s > 0);
  CATCH_CHECK(loopback_on->cpu.preempt_s == loopback_off->cpu.preempt_s);
  CATCH_CHECK(loopback_on->iteration_seconds == loopback_off->iteration_seconds);
  o.calibration.shaped_bytes_per_wake = -1;
  CATCH_CHECK(Simulate(o).status().code() == absl::StatusCode::kInvalidArgument);
}

// Simulate(o) with the calibration's `field` at 0 and at `value`: {off, on}.
std::pair<SimResult, SimResult> OffAndOn(SimOptions o, double Calibration::*field, double value) {
  o.calibration.*field = 0;
  absl::StatusOr<SimResult> off = Simulate(o);
  o.calibration.*field = value;
  absl::StatusOr<SimResult> on = Simulate(o);
  CATCH_REQUIRE(off.ok());
  CATCH_REQUIRE(on.ok());
  return {std::move(*off), std::move(*on)};
}

CATCH_TEST_CASE("a byte on a shaped link shared with another stream in its direction costs shaped_stream_s_per_byte x (1 - 1/k) more on each side") {
  // Separate placement, 2 + 2: each worker's machine sends 2 gradient streams (one to
  // each server) and each server's machine receives 2, and the values likewise: k = 2 at
  // every end, so each side pays half of shaped_stream_s_per_byte a byte (here as much
  // again as send_s_per_byte; recv_s_per_byte is 0 in this setup).
  SimOptions o = TwoWorkersOnOneHost(2);
  o.bandwidth_gbps = 10;
  auto [alone, shared] = OffAndOn(o, &Calibration::shaped_stream_s_per_byte, 1e-9);
  CATCH_REQUIRE(alone.cpu.send_s > 0);
  CATCH_REQUIRE(alone.cpu.recv_s == 0);
  CATCH_CHECK(shared.num_messages == alone.num_messages);
  CATCH_CHECK(shared.cpu.send_s == Approx(1.5 * alone.cpu.send_s));
  CATCH_CHECK(shared.cpu.recv_s == Approx(0.5 * alone.cpu.send_s));
  // Colocated 2 + 2: each machine sends one stream each way over the network (the other
  // worker's server, the other server's worker): k = 1, nothing more.
  o.colocated = true;
  auto [colocated_off, colocated_on] = OffAndOn(o, &Calibration::shaped_stream_s_per_byte, 1e-9);
  CATCH_CHECK(colocated_on.cpu.send_s > 0);
  CATCH_CHECK(colocated_on.cpu.send_s == colocated_off.cpu.send_s);
  CATCH_CHECK(colocated_on.iteration_seconds == colocated_off.iteration_seconds);
  // On loopback (no rate) nothing more either.
  o.colocated = false;
  o.bandwidth_gbps = 0;
  auto [loopback_off, loopback_on] = OffAndOn(o, &Calibration::shaped_stream_s_per_byte, 1e-9);
  CATCH_CHECK(loopback_on.cpu.send_s == loopback_off.cpu.send_s);
  o.calibration.shaped_stream_s_per_byte = -1;
  CATCH_CHECK(Simulate(o).status().code() == absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE("a message on a shaped link shared with another stream wakes its thread shaped_stream_wakes_per_byte x (1 - 1/k) more times a byte") {
  // Both cores of the workers' host compute while 160 kB messages are written, k = 2:
  // one wake-up per 40 kB of other streams' share makes 1 + 0.5 x 4 = 3 a message.
  SimOptions o = TwoWorkersOnOneHost(2);
  o.bandwidth_gbps = 10;
  o.calibration.preempt_s = 100e-6;
  auto [alone, shared] = OffAndOn(o, &Calibration::shaped_stream_wakes_per_byte, 1.0 / 40000);
  CATCH_REQUIRE(alone.cpu.preempt_s > 0);
  CATCH_CHECK(shared.cpu.preempt_s > 2.5 * alone.cpu.preempt_s);
  CATCH_CHECK(shared.iteration_seconds > alone.iteration_seconds);
  // Colocated 2 + 2 (k = 1): the charge is unchanged.
  o.colocated = true;
  auto [colocated_off, colocated_on] =
      OffAndOn(o, &Calibration::shaped_stream_wakes_per_byte, 1.0 / 40000);
  CATCH_CHECK(colocated_on.cpu.preempt_s == colocated_off.cpu.preempt_s);
  o.calibration.shaped_stream_wakes_per_byte = -1;
  CATCH_CHECK(Simulate(o).status().code() == absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE("the writers of one process that take turns on a shaped link cost shaped_stream_turns_s_per_byte more a byte, unless the credit holds a message of each stream") {
  // Separate placement, 2 + 2: each worker sends 2 gradient streams and each server 2
  // value streams (k = k_p = 2), messages of 160 kB. At credit 0 the two writers of each
  // process take turns: each side pays a further 0.5 x 1 ns a byte.
  SimOptions o = TwoWorkersOnOneHost(2);
  o.bandwidth_gbps = 10;
  auto [side_by_side, turns] = OffAndOn(o, &Calibration::shaped_stream_turns_s_per_byte, 1e-9);
  CATCH_REQUIRE(side_by_side.cpu.send_s > 0);
  CATCH_CHECK(turns.cpu.send_s == Approx(1.5 * side_by_side.cpu.send_s));
  CATCH_CHECK(turns.cpu.recv_s == Approx(0.5 * side_by_side.cpu.send_s));
  // A credit below two messages still lets one in flight: the same turns.
  o.credit_bytes = 200000;
  auto [below_off, below_on] = OffAndOn(o, &Calibration::shaped_stream_turns_s_per_byte, 1e-9);
  CATCH_CHECK(below_on.cpu.send_s == Approx(turns.cpu.send_s));
  // A credit of two messages lets both streams write side by side: nothing more.
  o.credit_bytes = 320000;
  auto [both_off, both_on] = OffAndOn(o, &Calibration::shaped_stream_turns_s_per_byte, 1e-9);
  CATCH_CHECK(both_on.cpu.send_s == both_off.cpu.send_s);
  CATCH_CHECK(both_on.cpu.recv_s == both_off.cpu.recv_s);
  // Colocated 2 + 2: one network stream per process, no turns whatever the credit.
  o.credit_bytes = 0;
  o.colocated = true;
  auto [colocated_off, colocated_on] =
      OffAndOn(o, &Calibration::shaped_stream_turns_s_per_byte, 1e-9);
  CATCH_CHECK(colocated_on.cpu.send_s == colocated_off.cpu.send_s);
  o.calibration.shaped_stream_turns_s_per_byte = -1;
  CATCH_CHECK(Simulate(o).status().code() == absl::StatusCode::kInvalidArgument);
}

CATCH_TEST_CASE("writers that take turns on a shaped link wake shaped_stream_turns_wakes_per_byte x (1 - 1/k) more times a byte, and not with a credit that holds both") {
  SimOptions o = TwoWorkersOnOneHost(2);
  o.bandwidth_gbps = 10;
  o.calibration.preempt_s = 100e-6;
  auto [side_by_side, turns] =
      OffAndOn(o, &Calibration::shaped_stream_turns_wakes_per_byte, 1.0 / 40000);
  CATCH_REQUIRE(side_by_side.cpu.preempt_s > 0);
  CATCH_CHECK(turns.cpu.preempt_s > 2.5 * side_by_side.cpu.preempt_s);
  CATCH_CHECK(turns.iteration_seconds > side_by_side.iteration_seconds);
  o.credit_bytes = 320000;
  auto [both_off, both_on] =
      OffAndOn(o, &Calibration::shaped_stream_turns_wakes_per_byte, 1.0 / 40000);
  CATCH_CHECK(both_on.cpu.preempt_s == both_off.cpu.preempt_s);
  o.calibration.shaped_stream_turns_wakes_per_byte = -1;
  CATCH_CHECK(Simulate(o).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace p3::sim
