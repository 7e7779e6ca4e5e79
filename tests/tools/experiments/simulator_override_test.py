"""tools/experiments/simulator.py validate --calibration (a what-if): every point is
predicted with its set's calibration but for the fields given, the sets' files stay as
they are, and without --out the what-if is refused. And score --inputs: the sets whose
sitting measured the model's inputs, or the others."""
import argparse
import contextlib
import io
import json
import os
import tempfile
import unittest
from unittest import mock

import simulator
import simulator_points as sp

POINT = {"model": "resnet50", "system": "p3", "bandwidth": 1.0, "workers": 2,
         "slice_params": 40000, "placement": "", "iterations": 13, "warmup": 3,
         "measured": 10.0, "runs": 3}


class ValidateOverrideTest(unittest.TestCase):
    def setUp(self):
        self.seen = []  # (calibration file, its fields) of each p3_sim call
        self.dir = tempfile.TemporaryDirectory()
        self.cals = {}
        for name, per_byte in (("a", 1e-10), ("b", 2e-10)):
            path = os.path.join(self.dir.name, f"{name}.json")
            with open(path, "w") as f:
                json.dump({"send_s_per_byte": per_byte, "shaped_s_per_byte_at_1g": 3e-10}, f)
            self.cals[name] = path

    def tearDown(self):
        self.dir.cleanup()

    def validate(self, override, out, fail_at=None, systems=(), points=None):
        seen, written = self.seen, []
        seen.clear()

        def run(config, profile, cal, sets, flags):
            with open(cal) as f:
                seen.append((cal, json.load(f)))
            if len(seen) == fail_at:
                raise SystemExit("p3_sim failed")
            return {"samples_per_second": 11.0,
                    "workers": [{"compute_s": 0.1, "exposed_comm_s": 0.0, "idle_s": 0.0}]}

        points = points or [dict(POINT, set="a"), dict(POINT, set="b"),
                            dict(POINT, set="a", bandwidth=2.5)]
        with mock.patch.object(sp, "points", lambda: points), \
                mock.patch.object(sp, "calibration_of",
                                  lambda s: {"file": self.cals[s], "extra": {}}), \
                mock.patch.object(sp, "local_of", lambda *a: 20.0), \
                mock.patch.object(simulator.calibration, "compute_scale", lambda *a: 1.0), \
                mock.patch.object(simulator.calibration, "profile", lambda name: "profile"), \
                mock.patch.object(simulator.p3_sim, "run", run), \
                mock.patch.object(simulator.simulator_noise, "point_runs", lambda: {}), \
                mock.patch.object(simulator.csv_io, "write_rows",
                                  lambda path, rows: written.append((path, rows))), \
                mock.patch.dict(simulator.JITTER, {"block_jitter": 0.0}):
            simulator.validate(out, override, systems)
        return seen, written

    def test_every_set_is_predicted_with_its_own_fields_but_the_ones_given(self):
        seen, written = self.validate({"shaped_s_per_byte_at_1g": 0.0}, "/tmp/whatif.csv")
        self.assertEqual([c["send_s_per_byte"] for _, c in seen], [1e-10, 2e-10, 1e-10])
        self.assertTrue(all(c["shaped_s_per_byte_at_1g"] == 0.0 for _, c in seen))
        # One file per set, the sets' own untouched, and none left behind.
        self.assertEqual(seen[0][0], seen[2][0])
        self.assertNotIn(seen[0][0], self.cals.values())
        self.assertFalse(any(os.path.exists(path) for path, _ in seen))
        with open(self.cals["a"]) as f:
            self.assertEqual(json.load(f)["shaped_s_per_byte_at_1g"], 3e-10)
        self.assertEqual([path for path, _ in written], ["/tmp/whatif.csv"])

    def test_a_function_override_changes_each_points_fields_from_its_set_and_itself(self):
        calls = []

        def halve(cal_set, fields, point):
            calls.append((cal_set["file"], point["bandwidth"]))
            k = 2 if point["bandwidth"] == 1.0 else 4
            return {"send_s_per_byte": fields["send_s_per_byte"] / k}
        seen, _ = self.validate(halve, "/tmp/whatif.csv")
        self.assertEqual([c["send_s_per_byte"] for _, c in seen], [0.5e-10, 1e-10, 0.25e-10])
        self.assertTrue(all(c["shaped_s_per_byte_at_1g"] == 3e-10 for _, c in seen))
        self.assertEqual(calls, [(self.cals["a"], 1.0), (self.cals["b"], 1.0),
                                 (self.cals["a"], 2.5)])  # once per point
        self.assertNotEqual(seen[0][0], seen[2][0])  # a file per set and replacement
        self.assertFalse(any(os.path.exists(path) for path, _ in seen))

    def test_points_of_the_same_set_and_replacement_share_one_file(self):
        seen, _ = self.validate(lambda cal_set, fields, point: {"send_s_per_byte": 0.0},
                                "/tmp/whatif.csv")
        self.assertEqual(seen[0][0], seen[2][0])
        self.assertNotEqual(seen[0][0], seen[1][0])

    def test_systems_predicts_only_their_points_and_needs_out(self):
        points = [dict(POINT, set="a"), dict(POINT, set="b", system="ddp")]
        seen, written = self.validate(None, "/tmp/whatif.csv", systems=("ddp",), points=points)
        self.assertEqual([path for path, _ in seen], [self.cals["b"]])
        self.assertEqual([r["system"] for r in written[0][1]], ["ddp"])
        with self.assertRaises(SystemExit):
            self.validate(None, "", systems=("ddp",), points=points)

    def test_without_an_override_the_sets_files_are_read_as_they_are(self):
        seen, _ = self.validate(None, "/tmp/whatif.csv")
        self.assertEqual([path for path, _ in seen],
                         [self.cals["a"], self.cals["b"], self.cals["a"]])

    def test_the_temporary_calibrations_go_when_a_prediction_fails(self):
        with self.assertRaises(SystemExit):
            self.validate({"shaped_s_per_byte_at_1g": 0.0}, "/tmp/whatif.csv", fail_at=2)
        self.assertEqual(len(self.seen), 2)  # sets a and b: two temporary files
        self.assertFalse(any(os.path.exists(path) for path, _ in self.seen))

    def test_an_override_without_out_is_refused(self):
        with self.assertRaises(SystemExit):
            self.validate({"shaped_s_per_byte_at_1g": 0.0}, "")


class ScoreByInputsTest(unittest.TestCase):
    def score(self, inputs):
        rows = [{"set": name, "fitted": False, "checkable": True, "protocol_hit": hit,
                 "ratio": ratio, "system": "p3", "bandwidth": "1.0"}
                for name, hit, ratio in (("new", True, 1.02), ("new", False, 1.3),
                                         ("old", False, 0.8), ("old", False, 0.7))]
        sets = {"new": {"file": "n.json", "preemption": "p.csv"}, "old": {"file": "o.json"}}
        args = argparse.Namespace(system="", bandwidth=None, inputs=inputs, after="", before="")
        out = io.StringIO()
        with mock.patch.object(simulator, "read_validation", lambda path=None: rows), \
                mock.patch.object(sp, "calibration_of", lambda s: sets[s]), \
                contextlib.redirect_stdout(out):
            simulator.score(args)
        return [line for line in out.getvalue().splitlines() if "**all**" in line][0]

    def test_own_takes_the_sets_with_their_sittings_preemption_runs_and_older_the_rest(self):
        self.assertIn("| 2 | **1** | 50%", self.score("own"))
        self.assertIn("| 2 | **0** | 0%", self.score("older"))
        self.assertIn("| 4 | **1** | 25%", self.score(""))


if __name__ == "__main__":
    unittest.main()
