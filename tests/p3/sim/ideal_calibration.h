// A calibration with no CPU costs, headers, gaps or TCP overhead, for the simulator's
// tests: every time in a simulated run is then bytes over the link rate plus the given
// latency, computable by hand. And the small models and clusters the tests run on it.
#ifndef P3_TESTS_P3_SIM_IDEAL_CALIBRATION_H_
#define P3_TESTS_P3_SIM_IDEAL_CALIBRATION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "p3/sim/simulator.h"

namespace p3::sim {

inline Calibration IdealCalibration(double latency_s = 0) {
  Calibration c;
  c.send_s_per_byte = c.recv_s_per_byte = 0;
  c.shaped_s_per_byte_at_1g = 0;
  c.per_message_s = 0;
  c.write_gap_s = 0;
  c.shm_s_per_byte = 0;
  c.update_s_per_byte = 0;
  c.header_bytes = 0;
  c.goodput_factor = 1.0;
  c.latency_s = latency_s;
  c.ring_send_s_per_byte = c.ring_recv_s_per_byte = c.ring_reduce_s_per_byte = 0;
  c.bf16_encode_s_per_value = c.bf16_decode_s_per_value = 0;
  c.f16_encode_s_per_value = c.f16_decode_s_per_value = 0;
  return c;
}

// One block per entry of `tensors` (one tensor each), with no compute time.
inline Profile Blocks(const std::vector<int64_t>& tensors) {
  Profile p;
  p.model = "test";
  p.batch = 1;
  for (size_t i = 0; i < tensors.size(); ++i) {
    p.blocks.push_back({"b" + std::to_string(i), 0.0, 0.0, {tensors[i]}});
  }
  return p;
}

// `workers` and `servers` on machines of their own at 1 Gbit/s, the ideal calibration
// with `latency`; 4 iterations, 1 of them warm-up.
inline SimOptions Separate(Profile profile, int workers, int servers, double latency) {
  SimOptions o;
  o.profile = std::move(profile);
  o.workers = workers;
  o.servers = servers;
  o.colocated = false;
  o.bandwidth_gbps = 1.0;
  o.calibration = IdealCalibration(latency);
  o.iterations = 4;
  o.warmup_iterations = 1;
  return o;
}

}  // namespace p3::sim

#endif  // P3_TESTS_P3_SIM_IDEAL_CALIBRATION_H_
