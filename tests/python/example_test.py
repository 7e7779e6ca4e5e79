"""The Python Fashion-MNIST example (worker/examples/python_fashion_mnist/): run.sh trains
train.py with two Python workers on a short share of the data and prints a test accuracy
well above chance; docs/python.md shows the diff between train_plain.py and train.py as
it is. Skipped (P3_SKIPPED) without Debian's dataset-fashion-mnist.
"""

import difflib
import os
import re
import subprocess
import sys
import tempfile
import unittest

DATA = "/usr/share/datasets/fashion-mnist"
HERE = "worker/examples/python_fashion_mnist"


class ExampleTest(unittest.TestCase):

    def test_run_prints_an_accuracy_well_above_chance(self):
        if not os.path.exists(DATA + "/train-images-idx3-ubyte.gz"):
            print("P3_SKIPPED: the Python Fashion-MNIST example: no " + DATA)
            return
        folder = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        config = os.path.join(folder, "c.textproto")
        with open(HERE + "/config.textproto") as f:
            text = f.read().replace("servers: 2", "servers: 1")
        with open(config, "w") as f:
            f.write(text)
        env = dict(os.environ, P3_EXAMPLE_CONFIG=config, P3_EXAMPLE_RUN_DIR=folder,
                   OMP_NUM_THREADS="1")
        run = subprocess.run([HERE + "/run.sh", "--limit=1920"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        out = run.stdout.decode(errors="replace")
        self.assertEqual(run.returncode, 0, out)
        accuracy = re.search(r"^accuracy ([0-9.]+)$", out, re.M)
        self.assertIsNotNone(accuracy, out)
        self.assertGreater(float(accuracy.group(1)), 0.4, out)  # chance: 0.1
        for r in (0, 1):
            self.assertTrue(os.path.exists(os.path.join(folder, "worker_{}.json".format(r))))

    def test_the_docs_show_the_diff_as_it_is(self):
        root = os.path.dirname(os.path.realpath("README.md"))
        with open(os.path.join(root, "docs/python.md")) as f:
            doc = f.read()
        shown = re.search(r"```diff\n(.*?)```", doc, re.S).group(1)
        with open(HERE + "/train_plain.py") as f:
            plain = f.read().splitlines()
        with open(HERE + "/train.py") as f:
            converted = f.read().splitlines()
        # Apart from the docstring: from the first import on.
        start = lambda lines: next(i for i, l in enumerate(lines) if l.startswith("import"))
        diff = difflib.unified_diff(plain[start(plain):], converted[start(converted):],
                                    "train_plain.py", "train.py", lineterm="", n=1)
        want = [l for l in diff if not l.startswith(("---", "+++", "@@"))]
        got = [l for l in shown.splitlines() if not l.startswith(("---", "+++", "@@"))]
        self.assertEqual(got, want)


if __name__ == "__main__":
    unittest.main(verbosity=2)
