// A calibration with no CPU costs, headers, gaps or TCP overhead, for the simulator's
// tests: every time in a simulated run is then bytes over the link rate plus the given
// latency, computable by hand.
#ifndef P3_TESTS_P3_SIM_IDEAL_CALIBRATION_H_
#define P3_TESTS_P3_SIM_IDEAL_CALIBRATION_H_

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

}  // namespace p3::sim

#endif  // P3_TESTS_P3_SIM_IDEAL_CALIBRATION_H_
