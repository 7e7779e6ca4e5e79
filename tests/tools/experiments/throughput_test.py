"""tools/experiments/ablation.py, throughput_congestion_control.py and p3_vs_ddp.py
(docs/results/throughput) on a few rows of real raw CSVs. The congestion-control table's
figures are checked by //tests/tools:cpu_tables_test."""
import csv
import os
import tempfile
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


class P3VersusDdpTest(unittest.TestCase):
    def write_raw(self, folder, runs):
        """runs: (time, mode, Gbit/s, samples/s) of ResNet-50, 2 workers."""
        path = os.path.join(folder, "raw.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_utc", "model", "system", "mode", "bandwidth_gbps",
                        "batch_per_worker", "workers", "slice_params", "samples_per_second",
                        "load1", "status", "output_dir", "wire_dtype"])
            for t, mode, bw, sps in runs:
                w.writerow([t, "resnet50", "ddp" if mode == "ddp" else "p3", mode, bw, 8, 2,
                            "" if mode == "ddp" else 40000, sps, 1.0, "ok", f"out/{t}", "float32"])
        return path

    def test_the_ratio_is_the_median_of_each_rounds_pair_not_of_the_medians(self):
        with tempfile.TemporaryDirectory() as d:
            # Paired ratios 1.2, 0.8, 1.1 (median 1.1); the medians' ratio would be 20 / 25.
            raw = self.write_raw(d, [("t1", "p3", 1, 12.0), ("t2", "ddp", 1, 10.0),
                                     ("t3", "p3", 1, 20.0), ("t4", "ddp", 1, 25.0),
                                     ("t5", "p3", 1, 33.0), ("t6", "ddp", 1, 30.0)])
            out_csv = os.path.join(d, "points.csv")
            out = fakes.run_script("p3_vs_ddp.py", f"--sweep=today={raw}", f"--csv={out_csv}")
            with open(out_csv) as f:
                (row,) = list(csv.DictReader(f))
        self.assertEqual(row["p3_over_ddp"], "1.1")
        self.assertEqual((row["p3_over_ddp_min"], row["p3_over_ddp_max"]), ("0.8", "1.2"))
        self.assertEqual(row["runs"], "3")
        self.assertIn("**1.100** ✓", out)  # the 1 Gbit/s target is 1.1

    def test_each_slice_size_of_one_raw_csv_is_its_own_sweep(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "raw.csv")
            with open(path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["time_utc", "model", "system", "mode", "bandwidth_gbps",
                            "batch_per_worker", "workers", "slice_params", "samples_per_second",
                            "load1", "status", "output_dir", "wire_dtype", "slice_auto"])
                # Per round: P3 at 40000, P3 automatic (the launcher chose 320000), DDP.
                for k, (given, auto, ddp) in enumerate([(40.0, 48.0, 44.0), (42.0, 50.0, 40.0)]):
                    w.writerow([f"t{k}a", "resnet50", "p3", "p3", 5, 8, 2, 40000, given, 1.0,
                                "ok", f"out/{k}a", "float32", ""])
                    w.writerow([f"t{k}b", "resnet50", "p3", "p3", 5, 8, 2, 320000, auto, 1.0,
                                "ok", f"out/{k}b", "float32", "1"])
                    w.writerow([f"t{k}c", "resnet50", "ddp", "ddp", 5, 8, 2, "", ddp, 1.0,
                                "ok", f"out/{k}c", "float32", ""])
            out_csv = os.path.join(d, "points.csv")
            fakes.run_script("p3_vs_ddp.py", f"--sweep=given={path}", f"--sweep=auto={path}@auto",
                             f"--sweep=n={path}@320000", f"--csv={out_csv}")
            with open(out_csv) as f:
                rows = {r["sweep"]: r for r in csv.DictReader(f)}
        # Rounds' ratios: 40/44, 42/40 (given); 48/44, 50/40 (auto); none at a given 320000.
        self.assertEqual(rows["given"]["p3_over_ddp"], str(round((40 / 44 + 42 / 40) / 2, 3)))
        self.assertEqual(rows["auto"]["p3_over_ddp"], str(round((48 / 44 + 50 / 40) / 2, 3)))
        self.assertEqual(rows["auto"]["p3_median_sps"], "49.0")
        self.assertNotIn("n", rows)  # 320000 was chosen, not given

    def test_a_bad_slice_selector_is_refused(self):
        p = fakes.run([fakes.PY, fakes.script("p3_vs_ddp.py"), "--sweep=today=raw.csv@big"],
                      check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("SLICES is default, auto or a number", p.stderr)

    def test_a_sweep_without_a_path_is_refused(self):
        p = fakes.run([fakes.PY, fakes.script("p3_vs_ddp.py"), "--sweep=today"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("give LABEL=path", p.stderr)


class OutputPiecesTest(unittest.TestCase):
    def write_run(self, folder, t, mode, sps, pieces=""):
        """One finished run of the Transformer at 1 Gbit/s in folder/raw.csv (the merge's
        layout: <model>/{k<pieces>,ddp}/raw.csv); `pieces` as bench_throughput records it."""
        path = os.path.join(folder, "raw.csv")
        new = not os.path.exists(path)
        os.makedirs(folder, exist_ok=True)
        with open(path, "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(["time_utc", "model", "system", "mode", "bandwidth_gbps",
                            "batch_per_worker", "workers", "slice_params", "samples_per_second",
                            "load1", "status", "output_dir", "wire_dtype", "output_pieces"])
            w.writerow([t, "transformer", "ddp" if mode == "ddp" else "p3", mode, 1, 8, 2,
                        "" if mode == "ddp" else 40000, sps, 1.0, "ok", f"out/{t}", "float32",
                        pieces])

    def test_each_piece_count_against_the_whole_layer_and_ddp_round_by_round(self):
        with tempfile.TemporaryDirectory() as d:
            runs = os.path.join(d, "runs", "transformer")
            # Two rounds: whole 5.0, 6.0; 8 pieces 6.0, 6.0 (the first run recorded no
            # column: the merge takes the folder's count); DDP 5.0, 4.0.
            self.write_run(os.path.join(runs, "k1"), "t1", "p3", 5.0)
            self.write_run(os.path.join(runs, "k8"), "t2", "p3", 6.0)
            self.write_run(os.path.join(runs, "ddp"), "t3", "ddp", 5.0)
            self.write_run(os.path.join(runs, "k1"), "t4", "p3", 6.0)
            self.write_run(os.path.join(runs, "k8"), "t5", "p3", 6.0, pieces=8)
            self.write_run(os.path.join(runs, "ddp"), "t6", "ddp", 4.0)
            raw = os.path.join(d, "raw.csv")
            fakes.run_script("output_pieces.py", "merge", os.path.join(d, "runs"), raw)
            with open(raw) as f:
                merged = list(csv.DictReader(f))
            self.assertEqual([r["time_utc"] for r in merged], ["t1", "t2", "t3", "t4", "t5", "t6"])
            self.assertEqual([r["output_pieces"] for r in merged], ["", "8", "", "", "8", ""])
            out_csv = os.path.join(d, "points.csv")
            out = fakes.run_script("output_pieces.py", "table", raw, f"--csv={out_csv}")
            with open(out_csv) as f:
                rows = {r["output_pieces"]: r for r in csv.DictReader(f)}
        # Per round: 8 pieces / whole 1.2, 1.0 (median 1.1); / DDP 1.2, 1.5 (1.35).
        self.assertEqual(rows["8"]["over_whole"], "1.1")
        self.assertEqual(rows["8"]["over_ddp"], "1.35")
        self.assertEqual(rows["1"]["over_ddp"], "1.25")
        self.assertEqual(rows["0"]["p3_median_sps"], "4.5")  # DDP's runs
        self.assertIn("| Transformer | 1 Gbit/s | P3, 8 pieces | 40000 | 6.00 (6.00 – 6.00) | **1.100**", out)


if __name__ == "__main__":
    unittest.main()
