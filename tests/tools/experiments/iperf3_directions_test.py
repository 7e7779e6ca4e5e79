"""tools/experiments/iperf3_directions.py (docs/results/streaming): the receiver rates read
from iperf3's reports, one direction and --bidir's two, the refusals, the table of medians,
and one real round on loopback (1 s a run) where iperf3 and ss are installed."""
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import fakes
import iperf3_directions as dirs


def report(up_bits, down_bits=None):
    end = {"sum_received": {"bits_per_second": up_bits}}
    if down_bits is not None:
        end["sum_received_bidir_reverse"] = {"bits_per_second": down_bits}
    return {"end": end}


class ReceivedGbps(unittest.TestCase):
    def test_one_direction_and_bidirs_reverse(self):
        r = report(12.5e9, 7.5e9)
        self.assertAlmostEqual(dirs.received_gbps(r), 12.5)
        self.assertAlmostEqual(dirs.received_gbps(r, reverse=True), 7.5)

    def test_a_one_way_report_has_no_reverse(self):
        with self.assertRaisesRegex(ValueError, "sum_received_bidir_reverse"):
            dirs.received_gbps(report(1e9), reverse=True)

    def test_an_error_report_or_nothing_received_is_refused(self):
        with self.assertRaisesRegex(ValueError, "unable to connect"):
            dirs.received_gbps({"error": "unable to connect to server"})
        with self.assertRaisesRegex(ValueError, "nothing received"):
            dirs.received_gbps(report(0))


class Table(unittest.TestCase):
    def test_medians_per_kind_and_each_way_over_one_way(self):
        rows = [dirs.row(1, "one_way", 20.0, None, 3, "0.5"),
                dirs.row(2, "one_way", 30.0, None, 3, "0.5"),
                dirs.row(3, "one_way", 25.0, None, 3, "0.5"),
                dirs.row(1, "bidir", 12.0, 10.0, 3, "0.5"),
                dirs.row(1, "two_pairs", 16.0, 14.0, 3, "0.5")]
        self.assertEqual(rows[3]["each_way_gbps"], "11.0000")
        self.assertEqual(rows[0]["down_gbps"], "")
        t = dirs.table(rows)
        self.assertIn("| one_way | 25.00 (20.00 – 30.00) | – | 25.00 (20.00 – 30.00) | 1.00 | 3 |", t)
        self.assertIn("| bidir | 12.00 (12.00 – 12.00) | 10.00 (10.00 – 10.00) | "
                      "11.00 (11.00 – 11.00) | 0.44 | 1 |", t)
        self.assertIn("| two_pairs | 16.00 (16.00 – 16.00) | 14.00 (14.00 – 14.00) | "
                      "15.00 (15.00 – 15.00) | 0.60 | 1 |", t)

    def test_an_unknown_kind_is_refused(self):
        with self.assertRaisesRegex(ValueError, "unknown kind 'sideways'"):
            dirs.measure("sideways", 1)


class RealRound(unittest.TestCase):
    def test_one_round_of_each_kind_on_loopback(self):
        for tool in ("iperf3", "ss"):
            if not shutil.which(tool):
                fakes.skip(self, "iperf3_directions real round", f"no {tool} on PATH")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "d.csv")
            p = subprocess.run([sys.executable, fakes.script("iperf3_directions.py"),
                                "--rounds=1", "--seconds=1", f"--csv={path}"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            rows = list(csv.DictReader(open(path)))
            self.assertEqual(sorted(r["kind"] for r in rows), sorted(dirs.KINDS))
            for r in rows:
                self.assertGreater(float(r["up_gbps"]), 0.05, r)
                if r["kind"] != "one_way":
                    self.assertGreater(float(r["down_gbps"]), 0.05, r)
            self.assertIn("| two_pairs |", p.stdout)


if __name__ == "__main__":
    unittest.main()
