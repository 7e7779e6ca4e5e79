"""tools/experiments/data_path_defaults.sh (docs/results/throughput): rounds that run the
previous defaults and the candidates at every rate, one CSV line per run, against a
stand-in bench_throughput.py that writes a raw.csv from its flags."""
import os
import tempfile
import unittest

import fakes

BENCH = """import os, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--") and "=" in a)
sets = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--set=")]
os.makedirs(args["out"], exist_ok=True)
with open(os.path.join(args["out"], "raw.csv"), "w") as f:
    f.write("bandwidth_gbps,sets\\n")
    for rate in args["bandwidths"].split(","):
        f.write(rate + "," + " ".join(sets) + "\\n")
"""


class DataPathDefaultsTest(unittest.TestCase):
    def test_rounds_alternate_the_two_settings_at_every_rate(self):
        with tempfile.TemporaryDirectory() as d:
            bench = os.path.join(d, "bench_throughput.py")
            with open(bench, "w") as f:
                f.write(BENCH)
            out = fakes.run(["bash", fakes.script("data_path_defaults.sh"), "2", "1,0"],
                            env={"BENCH_THROUGHPUT": bench}).stdout
        lines = out.splitlines()
        self.assertEqual(lines[0], "setting,round,bandwidth_gbps,sets")
        self.assertEqual(len(lines), 1 + 2 * 2 * 2)  # rounds x settings x rates
        self.assertEqual(lines[1], "old,1,1,scheduling.credit_bytes=0 network.tcp_notsent_lowat=0")
        self.assertEqual(lines[3], "new,1,1,scheduling.credit_bytes=1048576 "
                                   "network.tcp_notsent_lowat=131072")
        self.assertTrue(lines[-1].startswith("new,2,0,"))


if __name__ == "__main__":
    unittest.main()
