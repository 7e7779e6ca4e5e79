"""results_lib.p3_sim: one simulation through the command line, against a stand-in binary
that records its arguments."""
import os
import stat
import tempfile
import unittest

from results_lib import p3_sim

FAKE = """#!/usr/bin/python3
import json, sys
args = sys.argv[1:]
out = next(a.split("=", 1)[1] for a in args if a.startswith("--out="))
if "--set=mode=broken" in args:
    sys.stderr.write("config: mode broken is not one of ...\\n")
    sys.exit(1)
json.dump({"args": args, "iteration_seconds": 0.5, "samples_per_second": 32.0}, open(out, "w"))
"""


class P3SimTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.binary = os.path.join(self.tmp.name, "p3_sim")
        with open(self.binary, "w") as f:
            f.write(FAKE)
        os.chmod(self.binary, stat.S_IRWXU)

    def tearDown(self):
        self.tmp.cleanup()

    def test_runs_with_config_profile_calibration_sets_and_flags(self):
        r = p3_sim.run("configs/bench/resnet50.textproto", "p.json", "c.json",
                       ["mode=p3", "network.bandwidth_gbps=1"], ["--allreduce"],
                       binary=self.binary)
        self.assertEqual(r["samples_per_second"], 32.0)
        args = [a for a in r["args"] if not a.startswith("--out=")]
        self.assertEqual(args, ["--config=configs/bench/resnet50.textproto", "--profile=p.json",
                                "--calibration=c.json", "--set=mode=p3",
                                "--set=network.bandwidth_gbps=1", "--allreduce"])

    def test_no_calibration_flag_without_one_and_the_binary_from_the_environment(self):
        os.environ["P3_SIM"] = self.binary
        try:
            r = p3_sim.run("c.textproto", "p.json")
        finally:
            del os.environ["P3_SIM"]
        self.assertFalse(any(a.startswith("--calibration") for a in r["args"]))

    def test_a_failure_exits_with_the_command_and_its_errors(self):
        with self.assertRaises(SystemExit) as e:
            p3_sim.run("c.textproto", "p.json", sets=["mode=broken"], binary=self.binary)
        self.assertIn("p3_sim failed", str(e.exception))
        self.assertIn("mode broken is not one of", str(e.exception))


if __name__ == "__main__":
    unittest.main()
