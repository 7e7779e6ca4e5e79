"""tools/experiments/ablation.py and throughput_congestion_control.py
(docs/results/throughput) on a few rows of real raw CSVs. The congestion-control table's
figures are checked by //tests/tools:cpu_tables_test."""
import unittest

import fakes


class AblationTest(unittest.TestCase):
    def test_each_mode_against_the_baseline_and_p3(self):
        out = fakes.run_script("ablation.py", f"{fakes.TESTDATA}/ablation_raw.csv")
        lines = out.splitlines()
        self.assertEqual(lines[0], "| mode | what differs | samples/s (median, min–max) | runs "
                                   "| ÷ baseline | ÷ p3 |")
        self.assertIn("| `baseline` | whole tensors, FIFO, ack + pull, overlap | 11.4 "
                      "(11.4–11.4) | 1 | 1.00 |", out)
        p3 = next(line for line in lines if line.startswith("| `p3` |"))
        self.assertTrue(p3.endswith("| 1.00 |"), p3)
        self.assertEqual(len([line for line in lines if line.startswith("| `")]), 8)
        self.assertTrue(lines[-1].startswith("load1 at the start of the runs: "))

    def test_a_raw_csv_without_the_baseline_is_refused(self):
        p = fakes.run([fakes.PY, fakes.script("ablation.py"), "/dev/null"], check=False)
        self.assertNotEqual(p.returncode, 0)


class CongestionControlTest(unittest.TestCase):
    def test_one_congestion_control_is_refused_naming_what_it_found(self):
        p = fakes.run([fakes.PY, fakes.script("throughput_congestion_control.py"),
                       f"{fakes.TESTDATA}/ablation_raw.csv", "--column=mode"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("expected runs under two congestion controls", p.stderr)


if __name__ == "__main__":
    unittest.main()
