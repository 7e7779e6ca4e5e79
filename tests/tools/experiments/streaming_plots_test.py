"""tools/experiments/streaming_plots.py (docs/results/streaming): the medians, ranges and
ratios it plots, computed from small synthetic bench_streaming.py CSVs, and the command
lines it refuses (no benchmark run)."""
import contextlib
import csv
import io
import os
import tempfile
import unittest

import fakes
import streaming_plots as plots

# The columns of today's bench_streaming.py CSVs that the script reads.
COLUMNS = ["date", "commit", "driver_commit", "rate_gbps", "run", "ratio", "goodput_gbps",
           "cpu_s_per_gb", "host_cpu_s_per_gb", "iperf3_host_cpu_s_per_gb",
           "cpu_ratio_to_iperf3", "shared_memory", "memcpy_gbps", "goodput_to_memcpy",
           "memcpy_cpu_s_per_gb", "load1_start"]


def run_row(rate, ratio, cpu, host, iperf3_host, shared=False, memcpy_cpu="", memcpy="",
            to_memcpy="", goodput="", commit="abc1234", driver="def5678", load=1.0,
            date="2026-12-05T12:32:00Z"):
    return {"date": date, "commit": commit, "driver_commit": driver, "rate_gbps": rate,
            "run": 0, "ratio": ratio, "goodput_gbps": goodput, "cpu_s_per_gb": cpu,
            "host_cpu_s_per_gb": host, "iperf3_host_cpu_s_per_gb": iperf3_host,
            "cpu_ratio_to_iperf3": "" if iperf3_host == "" else host / iperf3_host,
            "shared_memory": int(shared), "memcpy_gbps": memcpy,
            "goodput_to_memcpy": to_memcpy, "memcpy_cpu_s_per_gb": memcpy_cpu,
            "load1_start": load}


class Csvs:
    """Writes CSVs into a temporary folder."""

    def __init__(self, test):
        self.dir = tempfile.TemporaryDirectory()
        test.addCleanup(self.dir.cleanup)

    def write(self, name, rows, columns=COLUMNS):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        return path


def assert_stat(test, got, expected):
    """got == expected, a (median, min, max), to rounding."""
    test.assertIsNotNone(got)
    for g, e in zip(got, expected):
        test.assertAlmostEqual(g, e, places=9)


def quiet(fn, *args):
    """fn(*args) with its stdout swallowed."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


class TodayTest(unittest.TestCase):
    def setUp(self):
        self.csvs = Csvs(self)
        # 2.5 Gbit/s: three runs (p3 ÷ iperf3 per run 2.0, 3.0, 2.5); shared memory: two
        # runs (p3 ÷ memcpy per run 4.0 and 5.0).
        self.path = self.csvs.write("after.csv", [
            run_row(2.5, 0.90, 1.5, 1.2, 0.6, load=0.8),
            run_row(2.5, 1.00, 1.4, 1.5, 0.5, load=1.9),
            run_row(2.5, 0.95, 1.3, 1.0, 0.4, load=1.2),
            run_row(0, 0.2, 0.4, 0.4, 0.1, shared=True, memcpy_cpu=0.1, memcpy=80,
                    to_memcpy=0.20),
            run_row(0, 0.3, 0.5, 0.5, 0.1, shared=True, memcpy_cpu=0.1, memcpy=80,
                    to_memcpy=0.25)])

    def test_medians_ranges_and_the_per_run_ratios_by_path(self):
        (rate, shm) = plots.today_points(plots.parse_sources([f"after={self.path}"], "today"))
        self.assertEqual(rate["path"], 2.5)
        self.assertEqual(rate["runs"], 3)
        self.assertEqual(rate["p3_cpu"], (1.2, 1.0, 1.5))
        self.assertEqual(rate["ref_cpu"], (0.5, 0.4, 0.6))
        # The median of the runs' own quotients (2.5), not the medians' quotient (2.4).
        self.assertAlmostEqual(rate["cpu_ratio"][0], 2.5)
        self.assertEqual(rate["goodput_ratio"], (0.95, 0.90, 1.00))
        self.assertEqual(rate["load1"], (0.8, 1.9))
        self.assertEqual(shm["path"], plots.SHM)
        self.assertEqual(shm["yardstick"], "memcpy")
        self.assertAlmostEqual(shm["cpu_ratio"][0], 4.5)  # per run 0.4 / 0.1, 0.5 / 0.1
        self.assertAlmostEqual(shm["goodput_ratio"][0], 0.225)  # goodput_to_memcpy, not ratio

    def test_the_table_prints_the_plotted_medians(self):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            self.assertEqual(plots.main(["today", f"--csv=after={self.path}"]), 0)
        self.assertIn("| after (abc1234) | 2.5 Gbit/s | 3 | 1.20 (1.00 – 1.50) | iperf3 0.50 "
                      "(0.40 – 0.60) | 2.50 (2.00 – 3.00) | 0.950 (0.900 – 1.000) | 0.8 – 1.9 "
                      "| after.csv |", buf.getvalue())
        self.assertIn("| after (abc1234) | shared memory | 2 | 0.45 (0.40 – 0.50) | memcpy 0.10",
                      buf.getvalue())

    def test_the_plot_is_a_png(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            fakes.skip(self, "streaming_plots_test", "python3-matplotlib is not installed")
        png = os.path.join(self.csvs.dir.name, "today.png")
        quiet(plots.main, ["today", f"--csv=after={self.path}", f"--png={png}"])
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class HistoryTest(unittest.TestCase):
    def test_a_sitting_before_the_host_columns_has_the_processes_figure_alone(self):
        csvs = Csvs(self)
        old_columns = ["date", "commit", "rate_gbps", "run", "ratio", "cpu_s_per_gb",
                       "load1_start"]
        old = csvs.write("streaming.csv", [run_row(5, 0.6, 2.2, "", ""),
                                           run_row(5, 0.62, 2.4, "", "")], old_columns)
        (p,) = plots.history_points(plots.parse_sources([f"12-01={old}"], "history"), [5.0])
        assert_stat(self, p["goodput_ratio"], (0.61, 0.6, 0.62))
        assert_stat(self, p["p3_cpu"], (2.3, 2.2, 2.4))
        self.assertIsNone(p["p3_host_cpu"])
        self.assertIsNone(p["cpu_ratio"])
        self.assertIn("| 12-01 | abc1234 | 2026-12-05 12:32 – 12:32 | 5 Gbit/s | 2 | "
                      "0.610 (0.600 – 0.620) (≥ 0.9) | 2.30 (2.20 – 2.40) | – | – | – |",
                      plots.history_table([p]))

    def test_a_label_given_twice_pools_its_runs_and_rates_without_runs_are_left_out(self):
        csvs = Csvs(self)
        a = csvs.write("a.csv", [run_row(0, 0.3, 1.0, 1.0, 0.5)])
        b = csvs.write("b.csv", [run_row(0, 0.5, 2.0, 2.0, 0.5), run_row(0, 0.4, 3.0, 3.0, 0.5)])
        points = plots.history_points(
            plots.parse_sources([f"s={a}", f"s={b}"], "history"), [2.5, 0.0])
        self.assertEqual(len(points), 1)
        self.assertEqual(points[0]["runs"], 3)
        self.assertEqual(points[0]["goodput_ratio"], (0.4, 0.3, 0.5))
        self.assertEqual(points[0]["files"], "a.csv, b.csv")

    def test_the_commit_is_the_binarys_or_the_tree_of_an_unstamped_one(self):
        self.assertEqual(plots.commit_of([{"commit": "abc"}, {"commit": "abc+dirty"}]),
                         "abc+dirty")
        self.assertEqual(plots.commit_of([{"commit": "unstamped", "driver_commit": "f00"}]),
                         "tree f00")


class ShmTest(unittest.TestCase):
    def test_goodput_over_memcpy_and_cpu_per_gb_of_the_shared_memory_runs_only(self):
        csvs = Csvs(self)
        path = csvs.write("shm.csv", [
            run_row(0, 0.3, 0.9, 0.9, 0.4),  # loopback: not plotted
            run_row(0, 0.6, 0.40, 0.60, 0.4, shared=True, memcpy_cpu=0.10, memcpy=70,
                    to_memcpy=0.16, goodput=11.2),
            run_row(0, 0.6, 0.46, 0.64, 0.4, shared=True, memcpy_cpu=0.12, memcpy=80,
                    to_memcpy=0.18, goodput=14.4),
            run_row(0, 0.6, 0.50, 0.80, 0.4, shared=True, memcpy_cpu=0.11, memcpy=75,
                    to_memcpy=0.17, goodput=12.0)])
        (p,) = plots.shm_points(plots.parse_sources([f"before={path}"], "shm"))
        self.assertEqual(p["runs"], 3)
        self.assertEqual(p["goodput_ratio"], (0.17, 0.16, 0.18))
        self.assertEqual(p["goodput"], (12.0, 11.2, 14.4))
        self.assertEqual(p["p3_cpu"], (0.46, 0.40, 0.50))
        self.assertEqual(p["p3_host_cpu"], (0.64, 0.60, 0.80))
        self.assertEqual(p["ref_cpu"], (0.11, 0.10, 0.12))


class RefusalTest(unittest.TestCase):
    def refused(self, *args):
        p = fakes.run([fakes.PY, fakes.script("streaming_plots.py")] + list(args), check=False)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        return p.stderr

    def test_a_csv_without_a_label_or_a_path_is_refused(self):
        self.assertIn("--csv=after.csv: give LABEL=path", self.refused("today", "--csv=after.csv"))
        self.assertIn("--csv=x=: give LABEL=path", self.refused("today", "--csv=x="))
        self.assertIn("--csv==a.csv: give LABEL=path", self.refused("shm", "--csv==a.csv"))

    def test_a_missing_file_is_refused_naming_it(self):
        self.assertIn("no such file: /nonexistent/x.csv",
                      self.refused("history", "--csv=a=/nonexistent/x.csv"))

    def test_a_csv_without_a_column_the_plot_reads_is_refused_naming_the_column(self):
        csvs = Csvs(self)
        cols = [c for c in COLUMNS if c != "iperf3_host_cpu_s_per_gb"]
        path = csvs.write("old.csv", [run_row(2.5, 0.9, 1.0, 1.0, 0.5)], cols)
        err = self.refused("today", f"--csv=old={path}")
        self.assertIn(f"--csv=old={path}: {path} has no column iperf3_host_cpu_s_per_gb", err)
        # The history reads fewer columns: the same file is accepted there.
        out = fakes.run_script("streaming_plots.py", "history", f"--csv=old={path}")
        self.assertIn("| old | abc1234 |", out)

    def test_a_csv_without_shared_memory_runs_is_refused_by_shm(self):
        csvs = Csvs(self)
        path = csvs.write("tcp.csv", [run_row(0, 0.3, 0.9, 0.9, 0.4, memcpy=70,
                                              to_memcpy=0.1, memcpy_cpu=0.1, goodput=7)])
        self.assertIn("no shared-memory runs", self.refused("shm", f"--csv=tcp={path}"))


if __name__ == "__main__":
    unittest.main()
