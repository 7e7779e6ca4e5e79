"""A job that mixes a C++ worker (p3_worker, rank 0) and a Python worker (`import p3`,
rank 1) on two p3_servers trains what the C++ `local` mode trains on the same config:
both workers' final parameters equal local's model.pt within float tolerance, in modes
p3 and baseline. The Python worker reads the C++ trainer's own batches for its rank
(p3._p3.TrainingData) and runs the Python twin of the zoo's small_cnn.
"""

import os
import subprocess
import sys
import unittest

try:
    import torch
except ImportError:
    print("P3_SKIPPED: mixed C++/Python job: /usr/bin/python3 cannot import torch")
    sys.exit(0)

import p3_cluster

ITERATIONS = 3
CPP_WORKER = "worker/p3_worker"
PY_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mixed_worker.py")


def config(folder, mode):
    path = p3_cluster.write_config(
        os.path.join(folder, "c_{}.textproto".format(mode)), mode=mode, workers=2, servers=2,
        extra='output {{ model_file: "{}/model_{}.pt" }}'.format(folder, mode))
    with open(path) as f:
        text = f.read().replace("iterations: 3", "iterations: {}".format(ITERATIONS))
    with open(path, "w") as f:
        f.write(text)
    return path


class MixedJobTest(unittest.TestCase):

    def setUp(self):
        self.folder = p3_cluster.temp_dir()
        local = config(self.folder, "local")
        run = subprocess.run([CPP_WORKER, "--config=" + local], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout.decode(errors="replace"))
        self.want = torch.load(os.path.join(self.folder, "model_local.pt"))

    def check(self, mode):
        cfg = config(self.folder, mode)
        py_out = os.path.join(self.folder, "python_{}.pt".format(mode))
        with p3_cluster.Servers(cfg, 2, self.folder) as servers:
            cpp = subprocess.Popen(
                [CPP_WORKER, "--config=" + cfg, "--rank=0", "--servers=" + ",".join(
                    servers.addresses)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            py = subprocess.run(
                [sys.executable, PY_WORKER, py_out, str(ITERATIONS)],
                env=p3_cluster.worker_env(1, 2, servers.addresses, cfg),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            cpp_text, _ = cpp.communicate(timeout=120)
            self.assertEqual(py.returncode, 0, py.stdout.decode(errors="replace"))
            self.assertEqual(cpp.returncode, 0, cpp_text.decode(errors="replace"))
            self.assertEqual(servers.wait(), [0, 0])
        results = {"python rank 1": torch.load(py_out),
                   "c++ rank 0": torch.load(os.path.join(self.folder, "model_{}.pt".format(mode)))}
        initial = p3_cluster.make_model(99).state_dict()
        for who, got in results.items():
            for name, want in self.want.items():
                if not name.endswith(("weight", "bias")):
                    continue
                err = float((got[name] - want).norm() / want.norm())
                self.assertLessEqual(err, 1e-5, "{} {} {}".format(mode, who, name))
        # The Python worker's own initial values were replaced.
        moved = results["python rank 1"]["fc2.weight"] - initial["fc2.weight"]
        self.assertGreater(float(moved.norm()), 1e-3)

    def test_mode_p3(self):
        self.check("p3")

    def test_mode_baseline(self):
        self.check("baseline")


if __name__ == "__main__":
    unittest.main(verbosity=2)
