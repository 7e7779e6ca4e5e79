"""Checkpoints with Python workers (docs/python.md, docs/checkpoints.md): `import p3` workers
under launch_cluster resume from the servers' checkpoints as p3_worker does, and end with
the parameters of the same job run without interruption, bit for bit.

- A job whose worker dies (no restarts: the run fails) is run again with
  checkpoint.resume: the new Python workers start at the checkpoint's iteration
  (`model.iteration`) and finish.
- A server SIGKILLed mid-run under --max_restarts=1: the launcher restarts every process,
  the Python workers included, from the newest checkpoint every server has.
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

try:
    import torch
except ImportError:
    print("P3_SKIPPED: Python workers and checkpoints: /usr/bin/python3 cannot import torch")
    sys.exit(0)

import p3_cluster

LAUNCHER = "tools/launch_cluster"
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_worker.py")
EVERY = 2


class CheckpointTest(unittest.TestCase):

    def start(self, name, steps, extra_args=(), env=None):
        """Starts launch_cluster with 2 Python workers and 2 servers, checkpoints every
        EVERY iterations into this test's folder; returns (process, run folder, params)."""
        out = os.path.join(self.folder, name)
        params = os.path.join(self.folder, name + "_params_RANK.pt")
        prefix = "".join("{}={} ".format(k, v) for k, v in sorted((env or {}).items()))
        command = "PYTHONPATH={}:{} {}{} {} {} {}".format(
            p3_cluster.PACKAGE_DIR, os.path.dirname(WORKER), prefix, sys.executable, WORKER,
            steps, params)
        proc = subprocess.Popen(
            [LAUNCHER, "--config=" + self.config, "--server_binary=server/p3_server",
             "--plot=false", "--kill_grace_s=2", "--set=output_dir=" + out,
             "--set=checkpoint.dir=" + self.checkpoints(name),
             "--set=checkpoint.every={}".format(EVERY),
             "--set=worker.command=" + command] + list(extra_args),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=dict(os.environ, OMP_NUM_THREADS="1"))
        return proc, out, params

    def checkpoints(self, name):
        return os.path.join(self.folder, "ckpt_" + name.split("_")[0])

    def finish(self, proc, timeout=300):
        text = proc.communicate(timeout=timeout)[0].decode(errors="replace")
        return proc.returncode, text

    def params(self, params):
        return [torch.load(params.replace("RANK", str(r))) for r in range(2)]

    def starts(self, out):
        """Each rank's iterations the Python workers started at (their logs, in order)."""
        found = {}
        for r in range(2):
            with open(os.path.join(out, "logs", "worker_{}.log".format(r))) as f:
                found[r] = [int(i) for i in re.findall(r"worker \d starts at iteration (\d+)",
                                                      f.read())]
        return found

    def setUp(self):
        self.folder = p3_cluster.temp_dir()
        self.config = p3_cluster.write_config(os.path.join(self.folder, "c.textproto"),
                                              workers=2, servers=2, rejoin_timeout_s=30)

    def reference(self, steps):
        """The same job uninterrupted (checkpoints on: they do not change the result)."""
        proc, out, params = self.start("reference", steps)
        rc, text = self.finish(proc)
        self.assertEqual(rc, 0, text)
        got = self.params(params)
        self.assertTrue(torch.equal(got[0], got[1]))
        want = p3_cluster.train_local(2, steps)
        self.assertLessEqual(float((got[0] - want).norm() / want.norm()), 1e-5)
        return got[0]

    def test_a_job_resumed_from_checkpoints_ends_as_if_never_interrupted(self):
        steps = 8
        want = self.reference(steps)
        # Rank 1 dies after iteration 4's step; without restarts the run ends with an error.
        proc, out, _ = self.start("crash_first", steps,
                                  env={"P3_TEST_DIE_AFTER": 4, "P3_TEST_DIE_RANK": 1})
        rc, text = self.finish(proc)
        self.assertNotEqual(rc, 0, text)
        # The same job again with checkpoint.resume (the newest checkpoint both servers
        # have): new Python processes, which start at that iteration.
        proc, out, params = self.start("crash_resumed", steps,
                                       ["--set=checkpoint.resume=true",
                                        "--set=checkpoint.resume_iteration=-1"])
        rc, text = self.finish(proc)
        self.assertEqual(rc, 0, text)
        starts = self.starts(out)
        self.assertEqual(starts[0], starts[1], text)
        self.assertEqual(len(starts[0]), 1, text)
        self.assertIn(starts[0][0], (2, 4), text)
        print("the crashed job resumed at iteration {}".format(starts[0][0]), file=sys.stderr)
        with open(os.path.join(out, "summary.json")) as f:
            self.assertEqual(json.load(f)["status"], "ok", text)
        for got in self.params(params):
            self.assertTrue(torch.equal(got, want), "resumed at {}: {} != {}".format(
                starts[0][0], float(got.norm()), float(want.norm())))

    def test_a_server_killed_restarts_the_python_workers_from_the_checkpoint(self):
        steps = 14
        want = self.reference(steps)
        mark = os.path.join(self.folder, "mark")
        proc, out, params = self.start(
            "kill_server", steps, ["--max_restarts=1"],
            env={"P3_TEST_MARK_AFTER": 5, "P3_TEST_MARK_FILE": mark,
                 "P3_TEST_STEP_SLEEP_S": 0.3})
        deadline = time.time() + 120
        while not os.path.exists(mark) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(mark), "rank 0 never reached iteration 5")
        port_file = os.path.join(out, "ports", "server_1.port")
        pids = subprocess.run(["pgrep", "-f", "--", "--server_index=1 --port_file=" + port_file],
                              stdout=subprocess.PIPE).stdout.split()
        self.assertEqual(len(pids), 1, "server 1 of this run: {}".format(pids))
        os.kill(int(pids[0]), 9)
        rc, text = self.finish(proc)
        self.assertEqual(rc, 0, text)
        restart = re.search(r"server 1 \(pid \d+\) was killed by signal 9 .*restarting every "
                            r"process from the checkpoints of iteration (\d+)", text)
        self.assertIsNotNone(restart, text)
        resumed = int(restart.group(1))
        self.assertEqual(resumed % EVERY, 0)
        self.assertGreaterEqual(resumed, 4, text)
        print("restarted from iteration {}".format(resumed), file=sys.stderr)
        starts = self.starts(out)
        for r in range(2):  # the log holds the restarted process's lines (after the first's)
            self.assertEqual(starts[r][-1], resumed, (r, starts, text))
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["status"], "ok", text)
        for got in self.params(params):
            self.assertTrue(torch.equal(got, want), "resumed at {}: {} != {}".format(
                resumed, float(got.norm()), float(want.norm())))


if __name__ == "__main__":
    unittest.main(verbosity=2)
