"""tools/experiments/simulator_ring_sitting.py: a sitting's iperf3 on loopback is the median
over its streaming CSV's loopback runs over a socket only; the ring's factor is the
reference sitting's iperf3 over this one's, or this sitting's compute scale of the point's
model over the reference's, 1 for a model no reference ran; only the ring's fields change."""
import unittest
from unittest import mock

import simulator_ring_sitting as ring

FIELDS = ["rate_gbps", "shared_memory", "iperf3_gbps"]


def row(rate, iperf3, shared=0):
    return {k: str(v) for k, v in zip(FIELDS, [rate, shared, iperf3])}


class RingSittingTest(unittest.TestCase):
    def test_loopback_iperf3_is_the_median_of_the_socket_runs_at_rate_0(self):
        rows = [row(0.0, 20.0), row(0.0, 24.0), row(0.0, 22.0),
                row(5.0, 4.7),                 # a shaped link
                row(0.0, 99.0, shared=1),      # the shared-memory path
                row(0.0, "")]                  # a run without iperf3
        self.assertEqual(ring.loopback_iperf3(rows), 22.0)

    def test_a_csv_without_iperf3_on_loopback_is_refused(self):
        with self.assertRaisesRegex(ValueError, "no loopback run"):
            ring.loopback_iperf3([row(1.0, 0.95)])

    def test_by_iperf3_a_faster_loopback_cheapens_the_ring(self):
        sets = {"ref.json": 17.0, "fast.json": 25.5}
        factors = ring.Factors("iperf3")
        with mock.patch.dict(ring.sp.SETS, {ring.REFERENCE_SET: {"file": "ref.json"}}), \
                mock.patch.object(ring.Factors, "iperf3", lambda self, s: sets[s["file"]]):
            self.assertAlmostEqual(factors({"file": "fast.json"}, {"model": "vgg19"}), 17 / 25.5)

    def test_by_compute_the_points_model_against_the_reference_sittings_same_model(self):
        scale = {("new", "vgg19"): 0.5, ("current", "vgg19"): 0.8,
                 ("new", "resnet50"): 0.6, (ring.sp.RING_POINT[0], "resnet50"): 0.9}
        factors = ring.Factors("compute", lambda s, m: scale[(s, m)])
        self.assertAlmostEqual(factors({}, {"set": "new", "model": "vgg19"}), 0.5 / 0.8)
        self.assertAlmostEqual(factors({}, {"set": "new", "model": "resnet50"}), 0.6 / 0.9)
        self.assertEqual(factors({}, {"set": "new", "model": "transformer"}), 1.0)

    def test_only_the_rings_fields_are_scaled(self):
        fields = {"ring_send_s_per_byte": 4e-10, "ring_recv_s_per_byte": 2e-10,
                  "ring_reduce_s_per_byte": 1e-10, "send_s_per_byte": 3e-10}
        self.assertEqual(ring.ring_fields(fields, 0.5),
                         {"ring_send_s_per_byte": 2e-10, "ring_recv_s_per_byte": 1e-10,
                          "ring_reduce_s_per_byte": 0.5e-10})


if __name__ == "__main__":
    unittest.main()
