"""launch_cluster runs Python workers through worker.command (the P3_* environment,
docs/python.md): two `import p3` workers (tests/python/train_worker.py) on the two servers
the launcher starts end with plain PyTorch SGD's parameters, the run's summary.json is
"ok" with both workers' result files read (p3_worker's keys); and under --max_restarts=1
a worker that kills itself after iteration 1 is started again with P3_REJOIN=1 and the
result is unchanged.
"""

import json
import os
import sys
import unittest

try:
    import torch
except ImportError:
    print("P3_SKIPPED: Python workers under launch_cluster: /usr/bin/python3 cannot import torch")
    sys.exit(0)

import subprocess

import p3_cluster

LAUNCHER = "tools/launch_cluster"
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_worker.py")
STEPS = 4


class LaunchTest(unittest.TestCase):

    def launch(self, extra_args=(), die_after=None):
        folder = p3_cluster.temp_dir()
        config = p3_cluster.write_config(os.path.join(folder, "c.textproto"), workers=2,
                                         servers=2, rejoin_timeout_s=30)
        out = os.path.join(folder, "run")
        params = os.path.join(folder, "params_RANK.pt")
        command = "PYTHONPATH={}:{} {}{} {} {} {}".format(
            p3_cluster.PACKAGE_DIR, os.path.dirname(WORKER),
            "P3_TEST_DIE_AFTER={} P3_TEST_DIE_RANK=1 ".format(die_after)
            if die_after is not None else "",
            sys.executable, WORKER, STEPS, params)
        run = subprocess.run(
            [LAUNCHER, "--config=" + config, "--server_binary=server/p3_server",
             "--plot=false", "--kill_grace_s=2", "--set=output_dir=" + out,
             "--set=worker.command=" + command] + list(extra_args),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
            env=dict(os.environ, OMP_NUM_THREADS="1"))
        text = run.stdout.decode(errors="replace")
        self.assertEqual(run.returncode, 0, text)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["status"], "ok", text)
        self.assertEqual(summary["worker_program"]["results_missing"], [], text)
        self.assertEqual(summary["iterations"], STEPS)
        want = p3_cluster.train_local(2, STEPS)
        for r in range(2):
            got = torch.load(params.replace("RANK", str(r)))
            self.assertLessEqual(float((got - want).norm() / want.norm()), 1e-5)
        return summary, text

    def test_two_python_workers_train_what_plain_sgd_trains(self):
        summary, _ = self.launch()
        self.assertGreater(summary["samples_per_second"], 0)

    def test_a_python_worker_killed_is_restarted_and_rejoins(self):
        # Rank 1's first process dies after iteration 1; the launcher starts the command
        # again with P3_REJOIN=1, and that one goes on from the cluster's iteration.
        _, text = self.launch(["--max_restarts=1"], die_after=1)
        self.assertRegex(text, r"restarted [^\n]*1 ×1 \(--max_restarts=1\)")


if __name__ == "__main__":
    unittest.main(verbosity=2)
