"""tools/experiments/streaming_streams.py (docs/results/simulator/simulator.md, "Streams per
link, measured"): the per-GB and per-MB figures of a run, the table's per-round
differences against the round's one-stream run and the µs per extra sleep, the
refusals, and one real round on loopback with the built benchmark (a few seconds)."""
import os
import subprocess
import sys
import tempfile
import unittest

import streaming_streams as ss


def row(rnd, servers, cpu_s, sleeps, rate=1.0, gb_each_way=0.5):
    """A run that moved gb_each_way up and as much down (1 GB across), with `cpu_s` of
    CPU split between the worker and the servers and `sleeps` split likewise."""
    b = int(gb_each_way * 1e9)
    return {"rate_gbps": rate, "servers": servers, "round": rnd, "bytes_sent": b,
            "bytes_received": b, "goodput_up_gbps": 0.9, "worker_cpu_s": cpu_s / 2,
            "server_cpu_s": cpu_s / 2, "host_busy_s": cpu_s * 1.1, "host_softirq_s": 0.1,
            "worker_voluntary_switches": sleeps // 2,
            "server_voluntary_switches": sleeps - sleeps // 2,
            "worker_involuntary_switches": 10, "server_involuntary_switches": 0}


class PerRun(unittest.TestCase):
    def test_per_gb_and_per_mb_across_both_directions(self):
        f = ss.per_run(row(1, 1, cpu_s=1.5, sleeps=7000))
        self.assertAlmostEqual(f["cpu_per_gb"], 1.5)
        self.assertAlmostEqual(f["host_per_gb"], 1.65)
        self.assertAlmostEqual(f["sleeps_per_mb"], 7.0)
        self.assertAlmostEqual(f["preempted_per_mb"], 0.01)


class Table(unittest.TestCase):
    def test_extra_cost_per_round_against_the_rounds_one_stream_run(self):
        rows = [row(1, 1, 1.50, 7000), row(1, 2, 1.60, 9000),  # +0.1 s/GB, +2 sleeps/MB
                row(2, 1, 1.40, 6000), row(2, 2, 1.46, 9000)]  # +0.06, +3: 20 µs
        text = ss.table(rows)
        line = next(l for l in text.splitlines() if l.startswith("| 1 Gbit/s | 2 |"))
        # Per round 50 and 20 µs a sleep: the median 35.0, with both ends.
        self.assertIn("| 35.0 (20.0 – 50.0) |", line)
        self.assertIn("+2.50 (+2.00 – +3.00)", line)
        one = next(l for l in text.splitlines() if l.startswith("| 1 Gbit/s | 1 |"))
        self.assertIn("| – | – | – | 2 |", one)

    def test_a_round_without_a_one_stream_run_is_left_out_of_the_differences(self):
        text = ss.table([row(1, 1, 1.5, 7000), row(1, 2, 1.6, 9000), row(2, 2, 9.0, 90000)])
        line = next(l for l in text.splitlines() if l.startswith("| 1 Gbit/s | 2 |"))
        self.assertIn("| 50.0 (50.0 – 50.0) |", line)

    def test_loopback_rows_come_last(self):
        text = ss.table([row(1, 1, 1, 10, rate=0.0), row(1, 1, 1, 10, rate=2.0)])
        links = [l.split("|")[1].strip() for l in text.splitlines()[2:]]
        self.assertEqual(links, ["2 Gbit/s", "loopback"])


class Fit(unittest.TestCase):
    def test_per_side_per_byte_over_the_other_streams_share(self):
        # Round 1: N = 2 adds 0.4 s/GB and 10 sleeps/MB (over a share of 1/2: 0.8, 20);
        # N = 3 adds 0.6 and 16 (over 2/3: 0.9, 24). Round 2: N = 2 adds 0.35, 9 (0.7, 18).
        rows = [row(1, 1, 1.5, 30000), row(1, 2, 1.9, 40000), row(1, 3, 2.1, 46000),
                row(2, 1, 1.5, 30000), row(2, 2, 1.85, 39000)]
        s_per_byte, wakes, n = ss.fit(rows)
        self.assertEqual(n, 3)
        self.assertAlmostEqual(s_per_byte, 0.8 / 2 * 1e-9)  # the median of 0.7, 0.8, 0.9
        self.assertAlmostEqual(wakes, 20 / 2 * 1e-6)        # of 18, 20, 24 per MB

    def test_no_one_stream_run_to_compare_with_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "one stream"):
            ss.fit([row(1, 2, 1.9, 40000)])


class Refusals(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([sys.executable, ss.__file__, *args], capture_output=True,
                              text=True)

    def test_the_counts_must_include_one_stream(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.run_tool("--servers=2,3", f"--csv={d}/x.csv")
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("--servers must include 1", p.stderr)

    def test_an_existing_csv_is_not_overwritten(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.csv")
            open(path, "w").write("kept\n")
            p = self.run_tool(f"--csv={path}")
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("--append", p.stderr)
            self.assertEqual(open(path).read(), "kept\n")


class RealRound(unittest.TestCase):
    def test_one_round_on_loopback_with_one_and_two_streams(self):
        # The test's data: bazel test runs it from the runfiles tree.
        bench, server = os.path.abspath("tools/bench_streaming"), os.path.abspath("server/p3_server")
        self.assertTrue(os.path.exists(bench) and os.path.exists(server), os.getcwd())
        with tempfile.TemporaryDirectory() as d:
            csv_path = os.path.join(d, "s.csv")
            p = subprocess.run(
                [sys.executable, ss.__file__, "--rates=0", "--servers=1,2", "--rounds=1",
                 "--params=400000", "--iterations=2", f"--bench={bench}",
                 f"--server={server}", f"--out_dir={d}/runs", f"--csv={csv_path}"],
                capture_output=True, text=True, timeout=240)
            self.assertEqual(p.returncode, 0, p.stderr)
            rows = ss.csv_io.read_rows(csv_path)
            self.assertEqual(sorted(r["servers"] for r in rows), ["1", "2"])
            for r in rows:
                self.assertEqual(int(r["bytes_sent"]), 2 * 400000 * 4)
            self.assertIn("| loopback | 2 |", p.stdout)


if __name__ == "__main__":
    unittest.main()
