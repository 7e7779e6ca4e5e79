"""The reliability page's scripts (docs/results/reliability): the soak's growth verdict and
plot from a few rows of its CSVs, the kill trials' config and plot (the trials themselves
run real clusters in //tests/cluster:rejoin_test), the rejoin-memory fit against a
stand-in rejoin_memory binary, and what the stalled-peer trials read from a worker trace."""
import json
import os
import tempfile
import unittest

import fakes
import kill_trials
import soak
import soak_rejoin_memory
import stalled_peer
from results_lib import csv_io

T = fakes.TESTDATA

# rejoin_memory's CSV: the heap grows by 100 bytes per rejoin after the 2nd, RSS by 4096.
REJOIN_MEMORY = """#!/bin/sh
echo "rejoin,iteration,heap_in_use_bytes,rss_bytes,shm_mappings"
for i in 0 1 2 3 4 5; do
  echo "$i,$((i + 1)),$((1000 + 100 * i)),$((40960 + 4096 * i)),0"
done
"""


class ReliabilityTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_soak_growth_leaves_out_the_killed_workers(self):
        samples = [dict(r, t_s=float(r["t_s"]), rss_kb=int(r["rss_kb"]))
                   for r in csv_io.read_rows(f"{T}/soak_rss.csv")]
        kills = [dict(k, rank=int(k["rank"])) for k in csv_io.read_rows(f"{T}/soak_kills.csv")]
        g = soak.growth(samples, kills, warmup_s=60)
        self.assertNotIn("worker_0", g)  # killed at 240 s
        first = next(s for s in samples if s["process"] == "server_0" and s["t_s"] >= 60)
        last = [s for s in samples if s["process"] == "server_0"][-1]
        self.assertEqual(g["server_0"]["growth_kb"], last["rss_kb"] - first["rss_kb"])

    def test_soak_across_rejoins_runs_from_warmup_to_a_settle_after_the_last_kill(self):
        samples = [{"t_s": float(t), "process": proc, "pid": 1, "rss_kb": 100 + t}
                   for t in range(0, 151, 30) for proc in ("server_0", "worker_1", "ref_worker_1")]
        kills = [{"t_s": 10.0, "rank": 1, "pid": 2}, {"t_s": 80.0, "rank": 1, "pid": 3},
                 {"t_s": 100.0, "rank": 1, "pid": 4}]
        w = soak.across_rejoins(samples, kills, settle_s=10, warmup_s=50)
        self.assertNotIn("worker_1", w)  # killed: not long-lived
        self.assertIn("ref_worker_1", w)  # the run without kills keeps its rank 1
        s0 = w["server_0"]
        self.assertEqual((s0["from_s"], s0["to_s"]), (60.0, 120.0))  # 110 s: 100 + settle
        self.assertEqual((s0["growth_kb"], s0["kills_between"], s0["last_kb"]), (60, 2, 250))

    def test_soak_plot_only_draws_from_the_csvs(self):
        png = os.path.join(self.tmp.name, "rss.png")
        fakes.run_script("soak.py", "--plot_only", f"--csv={T}/soak_rss.csv",
                         f"--kills={T}/soak_kills.csv", f"--plot={png}")
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        p = fakes.run([fakes.PY, fakes.script("soak.py"), "--csv=x", "--kills=y"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--json is required", p.stderr)

    def test_kill_trial_config_and_the_recovery_plot(self):
        text = kill_trials.config_text("p3", 40, 2, 2, True, 30, checkpoint_dir="/c",
                                       checkpoint_every=5)
        self.assertIn('checkpoint { dir: "/c" every: 5 }', text)
        self.assertIn("cluster { workers: 2 servers: 2 peer_timeout_s: 2 rejoin_timeout_s: 30 }",
                      text)
        self.assertIn("shared_memory: true", text)
        png = os.path.join(self.tmp.name, "recovery.png")
        fakes.run_script("kill_trials.py", f"--from_csv={T}/rejoin_kill_trials.csv",
                         f"--plot={png}")
        self.assertTrue(os.path.getsize(png) > 0)

    def test_rejoin_memory_fits_the_growth_per_rejoin(self):
        self.assertAlmostEqual(soak_rejoin_memory.slope([0, 1, 2], [1, 3, 5]), 2.0)
        binary = fakes.write_executable(self.tmp.name, "rejoin_memory", REJOIN_MEMORY)
        csv = os.path.join(self.tmp.name, "rm.csv")
        out = fakes.run_script("soak_rejoin_memory.py", f"--binary=fake={binary}", "--runs=2",
                               "--rejoins=6", "--skip=2", f"--csv={csv}")
        self.assertIn("fake,stream,2,100;100/100,4096,1200->1500", out)
        self.assertIn("fake,shared_memory,2,", out)
        flagged = fakes.run_script("soak_rejoin_memory.py", f"--binary=fake={binary}", "--runs=1",
                                   "--rejoins=6", "--skip=2", "--flags=more=--one_arena=false",
                                   f"--csv={csv}")
        self.assertIn("fake+more,stream,1,", flagged)
        rows = csv_io.read_rows(csv)
        self.assertEqual(len(rows), 2 * 2 * 6)
        self.assertEqual(list(rows[0])[:4], ["build", "mode", "run", "rejoin"])


    def test_stalled_peer_counts_sends_finished_during_the_stop_per_server(self):
        # Chrome trace events as TraceRecorder writes them: tracks named by metadata.
        events = [
            {"ph": "M", "name": "thread_name", "tid": 3, "args": {"name": "send to server 0"}},
            {"ph": "M", "name": "thread_name", "tid": 4, "args": {"name": "send to server 1"}},
            {"ph": "M", "name": "thread_name", "tid": 5, "args": {"name": "compute"}},
            # finished inside [1000, 2000]: counted
            {"ph": "X", "cat": "send", "tid": 3, "ts": 900, "dur": 200, "args": {"bytes": 2e6}},
            {"ph": "X", "cat": "send", "tid": 4, "ts": 1500, "dur": 10, "args": {"bytes": 1e6}},
            # finished before the stop, after it, or not a send: not counted
            {"ph": "X", "cat": "send", "tid": 3, "ts": 100, "dur": 800, "args": {"bytes": 5e6}},
            {"ph": "X", "cat": "send", "tid": 3, "ts": 1990, "dur": 20, "args": {"bytes": 7e6}},
            {"ph": "X", "cat": "compute", "tid": 5, "ts": 1200, "dur": 1, "args": {}},
        ]
        path = os.path.join(self.tmp.name, "trace.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)
        self.assertEqual(stalled_peer.sends_by_server(path, 1000, 2000), {0: 2.0, 1: 1.0})

    def test_stalled_peer_finds_what_the_stopped_server_held_back_on_the_other_link(self):
        events = [
            {"ph": "M", "name": "thread_name", "tid": 3, "args": {"name": "send to server 0"}},
            {"ph": "M", "name": "thread_name", "tid": 4, "args": {"name": "send to server 1"}},
            # iteration 6: all written before the stop
            {"ph": "X", "cat": "send", "name": "gradient 0", "tid": 3, "ts": 10, "dur": 5,
             "args": {"iteration": 6, "bytes": 4e6}},
            # iteration 7, on its way at the stop (1000 .. 2000)
            {"ph": "X", "cat": "send", "name": "gradient 1", "tid": 4, "ts": 990, "dur": 3000,
             "args": {"iteration": 7, "bytes": 1e6}},
            {"ph": "X", "cat": "send", "name": "gradient 2", "tid": 3, "ts": 1100, "dur": 100,
             "args": {"iteration": 7, "bytes": 2e6}},
            {"ph": "X", "cat": "send", "name": "gradient 4", "tid": 3, "ts": 1200, "dur": 900,
             "args": {"iteration": 7, "bytes": 3e6}},
            # a Pull is not a gradient
            {"ph": "X", "cat": "send", "name": "pull 0", "tid": 3, "ts": 1500, "dur": 900,
             "args": {"version": 8, "bytes": 5e6}},
        ]
        path = os.path.join(self.tmp.name, "trace.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)
        self.assertEqual(stalled_peer.held_back(path, 1000, 2000), (7, 2.0, 3.0))
        self.assertEqual(stalled_peer.held_back(path, 5, 9), (None, 0.0, 0.0))

if __name__ == "__main__":
    unittest.main()
