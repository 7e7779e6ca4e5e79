"""A re-measurement set of the simulator's validation (simulator_fresh_sets.py, "remeasure"):
configurations earlier sets measured, predicted before their runs. Its predictions say
how the model scored each configuration before; it is scored as any set, not pooled with
the fresh ones."""
import csv
import os
import tempfile
import unittest
from unittest import mock

import simulator_fresh
import simulator_points as sp
import simulator_protocol as protocol
import simulator_swap_inputs

REMEASURE = [n for n, f in simulator_fresh.FRESH.items() if f.get("remeasure")]

VALIDATION_FIELDS = ["set", "model", "system", "bandwidth", "workers", "slice_params",
                     "placement", "wire_dtype", "ratio", "checkable", "protocol_hit"]


def validation_row(set_name, model, system, bw, ratio, hit, checkable="True", workers=2):
    return {"set": set_name, "model": model, "system": system, "bandwidth": bw,
            "workers": workers, "slice_params": 40000, "placement": "", "wire_dtype": "",
            "ratio": ratio, "checkable": checkable, "protocol_hit": hit}


class RemeasureTest(unittest.TestCase):

    def test_a_remeasure_set_is_registered_but_not_pooled_with_the_fresh_sets(self):
        self.assertTrue(REMEASURE)
        for name in REMEASURE:
            self.assertIn(name, dict(sp.FRESH_SETS))
            self.assertIn(name, sp.SETS)  # its own sitting's calibration
            self.assertEqual(sp.SET_CALIBRATION[name], name)
            self.assertNotIn(name, protocol.FRESH_SETS)
            self.assertNotEqual(name, simulator_fresh.NEWEST)

    def test_earlier_scores_name_each_earlier_set_of_the_same_configuration_only(self):
        p = simulator_fresh.points_of(REMEASURE[0])[0]
        rows = [validation_row("old-a", p["model"], p["system"], p["bandwidth"], 1.234, "False"),
                validation_row("old-b", p["model"], p["system"], p["bandwidth"], 0.98, "True"),
                validation_row("old-c", p["model"], p["system"], p["bandwidth"], 1.5, "False",
                               checkable="False"),
                # Another rate, another worker count, and the set's own row: left out.
                validation_row("old-d", p["model"], p["system"], p["bandwidth"] + 1, 2.0, "False"),
                validation_row("old-e", p["model"], p["system"], p["bandwidth"], 2.0, "False",
                               workers=3),
                validation_row(p["set"], p["model"], p["system"], p["bandwidth"], 1.0, "True")]
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "simulator"))
            with open(os.path.join(d, "simulator", "simulator_validation.csv"), "w") as f:
                w = csv.DictWriter(f, VALIDATION_FIELDS)
                w.writeheader()
                w.writerows(rows)
            with mock.patch.object(simulator_fresh.sp, "results",
                                   lambda n: os.path.join(d, n)):
                said = simulator_fresh.earlier_scores(p)
                no_earlier = simulator_fresh.earlier_scores(dict(p, bandwidth=123.0))
        self.assertEqual(said, "old-a 1.234 (miss); old-b 0.980 (**hit**); "
                               "old-c 1.500 (*not checkable*)")
        self.assertEqual(no_earlier, "none")

    def test_predict_takes_a_remeasure_sets_measured_configurations_and_says_where(self):
        name = REMEASURE[0]
        pts = simulator_fresh.points_of(name)
        earlier = dict(pts[0], set="old-a", measured=10.0, runs=3)
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "simulator"))
            with open(os.path.join(d, "simulator", "simulator_validation.csv"), "w") as f:
                w = csv.DictWriter(f, VALIDATION_FIELDS)
                w.writeheader()
                w.writerow(validation_row("old-a", pts[0]["model"], pts[0]["system"],
                                          pts[0]["bandwidth"], 1.4, "False"))
            with mock.patch.object(simulator_fresh.sp, "results", lambda n: os.path.join(d, n)), \
                    mock.patch.object(simulator_fresh.sp, "points", lambda: [earlier]), \
                    mock.patch.object(simulator_fresh, "predict_with",
                                      lambda *a: ("with", {"file": "c.json", "extra": {}}, 9.0)), \
                    mock.patch.object(simulator_fresh.calibration, "compute_scale",
                                      lambda *a: 0.5), \
                    mock.patch.object(simulator_fresh.simulator, "predict",
                                      lambda *a: {"samples_per_second": 12.345}), \
                    mock.patch.object(simulator_fresh.paths, "git_commit", lambda **k: "abc"):
                simulator_fresh.predict(mock.Mock(set=name))
                predictions = simulator_fresh.FRESH[name]["predictions"]
                with open(os.path.join(d, predictions + ".md")) as f:
                    md = f.read()
                with open(os.path.join(d, predictions + ".csv")) as f:
                    got = list(csv.DictReader(f))
        self.assertEqual(len(got), len(pts))
        self.assertEqual({r["predicted_sps"] for r in got}, {"12.345"})
        self.assertIn("Predictions before a re-measurement", md)
        self.assertIn(f"| {simulator_fresh.name(pts[0])} | old-a 1.400 (miss) |", md)
        # A fresh set with the same earlier point is refused.
        fresh = simulator_fresh.NEWEST
        seen = dict(simulator_fresh.points_of(fresh)[0], set="old-a", measured=1.0, runs=3)
        with mock.patch.object(simulator_fresh.sp, "points", lambda: [seen]), \
                self.assertRaises(SystemExit):
            simulator_fresh.predict(mock.Mock(set=fresh))

    def test_swap_inputs_swaps_each_differing_field_alone_with_its_partner(self):
        a = {"_source": "a", "send_s_per_byte": 1, "recv_s_per_byte": 1, "preempt_s": 5,
             "shaped_exponent": 0.1}
        b = {"_source": "b", "send_s_per_byte": 2, "recv_s_per_byte": 3, "preempt_s": 5,
             "shaped_exponent": 0.4}
        got = dict(simulator_swap_inputs.swaps(a, b))
        # The same preempt_s and the _source are not swapped; recv goes with send.
        self.assertEqual(sorted(got), ["send_s_per_byte", "shaped_exponent"])
        self.assertEqual(got["send_s_per_byte"],
                         dict(a, send_s_per_byte=2, recv_s_per_byte=3))
        self.assertEqual(got["shaped_exponent"], dict(a, shaped_exponent=0.4))
        self.assertEqual(a["send_s_per_byte"], 1)  # a itself unchanged


if __name__ == "__main__":
    unittest.main()
