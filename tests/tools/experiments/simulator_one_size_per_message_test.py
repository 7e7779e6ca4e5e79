"""tools/experiments/simulator_one_size_per_message.py: a one-size calibration given another
per-message cost moves the difference into its per-byte costs, so that a message of the
streaming run's size costs each side what it did, and its shared-memory cost is the one
calibrate would write for that per-message cost."""
import unittest

import simulator_calibration as calibration
import simulator_one_size_per_message as one_size

FIELDS = {"per_message_s": 11e-6, "send_s_per_byte": 0.3e-9, "recv_s_per_byte": 0.25e-9,
          "write_gap_s": 120e-6}


class OneSizePerMessageTest(unittest.TestCase):
    def test_a_streaming_message_costs_what_it_did_at_the_new_per_message_cost(self):
        b = calibration.STREAMING_MESSAGE_BYTES
        got = one_size.one_size_fields(FIELDS, 5e-6, shm_cpu_s_per_gb=0.5,
                                       streaming_update=0.05)
        self.assertEqual(got["per_message_s"], 5e-6)
        for side in ("send_s_per_byte", "recv_s_per_byte"):
            self.assertAlmostEqual((got[side] * b + 5e-6) * 1e9,
                                   (FIELDS[side] * b + 11e-6) * 1e9)
        self.assertGreater(got["send_s_per_byte"], FIELDS["send_s_per_byte"])
        self.assertEqual(got["shm_s_per_byte"], calibration.shm_s_per_byte(0.5, 0.05, 5e-6))
        self.assertNotIn("write_gap_s", got)  # the gap is kept


if __name__ == "__main__":
    unittest.main()
