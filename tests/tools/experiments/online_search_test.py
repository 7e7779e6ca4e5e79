"""The online search's scripts (docs/results/online_search): the table of searched runs
against fixed sizes from run folders, the replays of decision rules on recorded
iterations, the cost of a re-plan from a trace, and the re-plan memory script against
stand-in binaries."""
import json
import os
import shutil
import tempfile
import unittest

import fakes
import online_search_replay
from results_lib import csv_io


def make_run(root, kind, name, rate, search=None, tuning=None):
    run = os.path.join(root, f"{kind}_bw{rate}", "runs", name)
    os.makedirs(os.path.join(run, "records"))
    os.makedirs(os.path.join(run, "results"))
    for rank in range(2):
        with open(os.path.join(run, "records", f"worker_{rank}.csv"), "w") as f:
            f.write("iteration,loss,iteration_seconds,samples_per_second\n")
            for i in range(8):
                sps = (10.0 if i < 4 else 20.0) if search else 15.0
                f.write(f"{i},1.0,{8 / sps},{sps}\n")
    result = {"iterations": 8, "param_l2": 12.5}
    if search:
        result["online_search"] = search
    with open(os.path.join(run, "results", "worker_0.json"), "w") as f:
        json.dump(result, f)
    if tuning:
        with open(os.path.join(run, "summary.json"), "w") as f:
            json.dump({"tuning": tuning}, f)
    return run


class OnlineSearchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_searched_runs_against_the_best_fixed_size(self):
        out = os.path.join(self.root, "out")
        make_run(out, "auto", "resnet50_p3_bw1.0_s0_w2_r0_101010", "1.0",
                 search={"timed": [{"slice_params": 40000, "mean_seconds": 0.8},
                                   {"slice_params": 160000, "mean_seconds": 0.4}],
                         "chosen_slice_params": 160000, "done_iteration": 4},
                 tuning={"searched": True})
        make_run(out, "fixed", "resnet50_p3_bw1.0_s40000_w2_r0_101111", "1.0")
        csv = os.path.join(self.root, "online_search.csv")
        stdout = fakes.run_script("online_search.py", f"--out={out}=abc1234", f"--csv={csv}")
        rows = {r["kind"]: r for r in csv_io.read_rows(csv)}
        self.assertEqual(rows["auto"]["chosen_slice_params"], "160000")
        self.assertEqual(rows["auto"]["samples_per_second_after_search"], "20.0")
        self.assertEqual(rows["auto"]["start_from"], "simulator")
        self.assertEqual(rows["auto"]["timed"], "40000:0.800 160000:0.400")
        self.assertEqual(rows["fixed"]["samples_per_second_whole"], "15.0")
        self.assertIn("| resnet50 | 1 | abc1234 | 1: 20.00 (20.00 – 20.00) | 160000 | "
                      "40000: 15.00 | 1.33 | 15.00 | 1.33 |", stdout)
        # Run again on another folder: the CSV keeps the rows of runs not found again.
        other = os.path.join(self.root, "other")
        make_run(other, "fixed", "resnet50_p3_bw1.0_s160000_w2_r0_121212", "1.0")
        fakes.run_script("online_search.py", f"--out={other}", f"--csv={csv}")
        self.assertEqual(len(csv_io.read_rows(csv)), 3)

    def test_replays_of_the_rules_on_recorded_iterations(self):
        stdout = fakes.run_script("online_search_replay.py",
                                  f"--csv={fakes.TESTDATA}/online_search_iterations.csv",
                                  "--replays=50")
        self.assertIn("| 1 | 2 |", stdout)  # 2 runs at 1 Gbit/s
        self.assertIn("| mean, 2 %, x1 x2 x4 x1/2 (now) |", stdout)

    def test_a_rule_keeps_the_start_unless_a_candidate_is_clearly_faster(self):
        rule = ([1, 4], lambda w: sum(w) / len(w), 0.02)
        times = {40000: [1.0, 1.0, 1.0], 160000: [0.99, 0.99, 0.99]}
        self.assertEqual(online_search_replay.choose(rule, 40000, times.get), 40000)
        times[160000] = [0.5, 0.5, 0.5]
        self.assertEqual(online_search_replay.choose(rule, 40000, times.get), 160000)
        self.assertEqual(online_search_replay.clamp(5), online_search_replay.GRID_MIN)

    def test_the_cost_of_each_switch_from_a_trace(self):
        run = os.path.join(self.root, "traced")
        make_run(self.root, "fixed", "x", "5")
        shutil.copytree(os.path.join(self.root, "fixed_bw5", "runs", "x"), run)
        os.makedirs(os.path.join(run, "logs"))
        with open(os.path.join(run, "logs", "server_0.log"), "w") as f:
            f.write("online search: re-plan to slices of 320000 from iteration 5\n")
        events = [{"ph": "X", "cat": "update", "pid": 200, "dur": 2.5e6, "args": {"iteration": 4}},
                  {"ph": "X", "cat": "update", "pid": 201, "dur": 0.5e6, "args": {"iteration": 4}},
                  {"ph": "X", "cat": "update", "pid": 200, "dur": 0.2e6, "args": {"iteration": 5}},
                  {"ph": "X", "cat": "compute", "pid": 100, "dur": 9e6, "args": {"iteration": 4}}]
        with open(os.path.join(run, "trace.json"), "w") as f:
            json.dump({"traceEvents": events}, f)
        csv = os.path.join(self.root, "switch.csv")
        fakes.run_script("online_search_replan_switch.py", f"--csv={csv}", f"{run}=f3bd312=note")
        row = csv_io.read_rows(csv)[0]
        self.assertEqual((row["switch1_to"], row["switch1_seconds"]), ("320000", "2.500"))
        self.assertEqual(row["switch2_to"], "")
        self.assertEqual(row["server_update_seconds"], "3.00 0.20")
        self.assertEqual(row["iteration_seconds"].split()[0], "0.53")

    def test_replan_memory_script_reports_the_peak_and_the_search(self):
        binaries = os.path.join(self.root, "bin")
        os.makedirs(binaries)
        fakes.write_executable(binaries, "launch_cluster",
                               "#!/bin/sh\necho 'online search: chose 320000'\n")
        p = fakes.run(["bash", fakes.script("online_search_replan_memory.sh"), binaries,
                       os.path.join(self.root, "o")])
        self.assertIn("peak server RSS KiB: 0", p.stdout)
        self.assertIn("online search: chose 320000", p.stdout)


if __name__ == "__main__":
    unittest.main()
