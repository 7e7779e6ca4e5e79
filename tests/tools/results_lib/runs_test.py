"""results_lib.runs: a launcher run's folder, and one run of a (stand-in) launcher."""
import os
import stat
import tempfile
import unittest

from results_lib import runs

FAKE_LAUNCHER = """#!/bin/sh
# Writes summary.json into --set=output_dir=...; fails when asked to.
for a in "$@"; do
  case "$a" in
    --set=output_dir=*) out="${a#--set=output_dir=}" ;;
    --set=fail=true) echo "config: no field fail" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
echo '{"samples_per_second": 640.0, "param_l2": 12.5}' > "$out/summary.json"
echo "$@" > "$out/args"
"""


class RunsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.launcher = os.path.join(self.tmp.name, "launch_cluster")
        with open(self.launcher, "w") as f:
            f.write(FAKE_LAUNCHER)
        os.chmod(self.launcher, stat.S_IRWXU)

    def tearDown(self):
        self.tmp.cleanup()

    def test_launch_returns_the_summary_and_the_facts(self):
        out = os.path.join(self.tmp.name, "run")
        summary, facts = runs.launch(self.launcher, "configs/default.textproto", out,
                                     ["training.iterations=10"], ["--plot=false"])
        self.assertEqual(summary["param_l2"], 12.5)
        self.assertEqual(facts["command"], f"{self.launcher} --config=configs/default.textproto "
                         f"--set=output_dir={out} --set=training.iterations=10 --plot=false")
        self.assertGreaterEqual(facts["seconds"], 0)
        self.assertEqual(runs.summary(out), summary)

    def test_a_failed_launch_exits_with_its_output(self):
        with self.assertRaises(SystemExit) as e:
            runs.launch(self.launcher, "c", os.path.join(self.tmp.name, "bad"), ["fail=true"])
        self.assertIn("exited 2", str(e.exception))
        self.assertIn("no field fail", str(e.exception))
        self.assertEqual(runs.summary_or_empty(os.path.join(self.tmp.name, "bad")), {})

    def test_progress_iteration_is_the_last_progress_line(self):
        log = runs.worker_log(self.tmp.name, 1)
        self.assertEqual(runs.progress_iteration(log), 0)
        os.makedirs(os.path.dirname(log))
        with open(log, "w") as f:
            f.write("start\nPROGRESS iteration=3 loss=2.1\nPROGRESS iteration=12 loss=1.0\n")
        self.assertEqual(runs.progress_iteration(log), 12)


if __name__ == "__main__":
    unittest.main()
