"""tools/experiments/simulator_fresh.py (issue 36's fresh sets): the commit `collect`'s
rows record is the one the runs' own servers say they were built from; a point's credit
(scheduling.credit_bytes) reaches its runs, its name, its configuration and the
simulation, and the runs' credit comes back from their resolved config."""
import os
import tempfile
import unittest
from unittest import mock

import simulator
import simulator_fresh
import simulator_points as sp
from results_lib import raw_csv, runs


class CollectTest(unittest.TestCase):
    def test_collect_records_the_commit_the_runs_servers_were_built_from(self):
        def server_log(out, point, run, first_line):
            logs = os.path.join(out, point, "runs", run, "logs")
            os.makedirs(logs, exist_ok=True)
            with open(os.path.join(logs, "server_0.log"), "w") as f:
                f.write(first_line + "\nlistening\n")

        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(simulator_fresh.binaries_commit(out), "")  # no runs
            server_log(out, "local_resnet50", "r0", "p3_server 0 built from unstamped")
            self.assertEqual(simulator_fresh.binaries_commit(out), "")  # unstamped: HEAD
            server_log(out, "resnet50_p3_6g", "r0", "p3_server 0 built from 7978e46")
            server_log(out, "resnet50_p3_6g", "r1", "p3_server 1 built from 7978e46")
            self.assertEqual(simulator_fresh.binaries_commit(out), "7978e46")
            server_log(out, "vgg19_p3_3g", "r0", "p3_server 0 built from cd526dc")
            with self.assertRaises(SystemExit) as mixed:
                simulator_fresh.binaries_commit(out)
            self.assertIn("7978e46, cd526dc", str(mixed.exception))


class CreditTest(unittest.TestCase):
    SET = "credit-2026-12-07"

    def test_a_points_credit_reaches_its_name_configuration_runs_and_simulation(self):
        zero, one = (p for p in simulator_fresh.points_of(self.SET)
                     if p["workers"] == 3 and p["placement"] == "colocated"
                     and p["bandwidth"] == 1.0)
        self.assertEqual((zero["credit_bytes"], one["credit_bytes"]), (0, 1048576))
        self.assertEqual(simulator_fresh.name(zero), "resnet50_p3_1g_w3_colocated")
        self.assertEqual(simulator_fresh.name(one), "resnet50_p3_1g_w3_colocated_c1048576")
        self.assertNotEqual(simulator_fresh.kind(zero), simulator_fresh.kind(one))
        with mock.patch.object(simulator_fresh.subprocess, "run") as run:
            simulator_fresh.bench(one, "/tmp/out", 23, 3)
            simulator_fresh.bench(zero, "/tmp/out", 23, 3)
        with_credit, without = (c.args[0] for c in run.call_args_list)
        self.assertIn("--set=scheduling.credit_bytes=1048576", with_credit)
        self.assertFalse(any("credit_bytes" in a for a in without))
        # The simulation is told the credit (0 where a point says none: every older set).
        with mock.patch.object(simulator.p3_sim, "run",
                               return_value={"samples_per_second": 1.0}) as sim, \
                mock.patch.object(simulator.calibration, "profile", return_value="p.json"), \
                mock.patch.object(simulator.sp, "profile_name", return_value="p.json"):
            simulator.predict(one, "c.json", 0.5, {})
            simulator.predict({k: v for k, v in zero.items() if k != "credit_bytes"},
                              "c.json", 0.5, {})
        said = [" ".join(map(str, c.args)) + " " + " ".join(map(str, c.kwargs.values()))
                for c in sim.call_args_list]
        self.assertIn("scheduling.credit_bytes=1048576", said[0])
        self.assertIn("scheduling.credit_bytes=0", said[-1])  # each point's seeds run alike

    def test_runs_are_grouped_by_the_credit_their_resolved_config_states(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "config.textproto"), "w") as f:
                f.write("scheduling {\n  credit_bytes: 1048576\n  pack_params: 65536\n}\n")
            self.assertEqual(runs.resolved_credit_bytes(d), 1048576)
            with open(os.path.join(d, "config.textproto"), "w") as f:
                f.write("scheduling {\n  pack_params: 65536\n}\n")
            self.assertIsNone(runs.resolved_credit_bytes(d))  # the default, 0
        row = {"model": "resnet50", "mode": "p3", "bandwidth_gbps": "1", "workers": "3",
               "slice_params": "40000", "iterations": "23", "warmup": "3", "status": "ok",
               "samples_per_second": "18.0"}
        rows = [dict(row), dict(row, samples_per_second="19.0", credit_bytes="1048576"),
                dict(row, samples_per_second="18.5", credit_bytes="")]
        groups = sp.run_groups(rows)
        self.assertEqual(sorted((k[-1], sorted(v)) for k, v in groups.items()),
                         [(0, [18.0, 18.5]), (1048576, [19.0])])
        self.assertEqual(raw_csv.credit_bytes(rows[0]), 0)


if __name__ == "__main__":
    unittest.main()
