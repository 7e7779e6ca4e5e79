"""tools/experiments/server_hot_loop.sh (docs/results/server_hot_loop): two builds of
bench_shard, alternating, one CSV line per run, against stand-ins."""
import tempfile
import unittest

import fakes

BENCH = """#!/bin/sh
case "$1" in --header) echo "optimizer,ns_per_value"; exit 0 ;; esac
echo "{build},$1"
"""


class ServerHotLoopTest(unittest.TestCase):
    def test_builds_alternate_over_every_config_and_run(self):
        with tempfile.TemporaryDirectory() as d:
            old = fakes.write_executable(d, "old", BENCH.format(build="o"))
            new = fakes.write_executable(d, "new", BENCH.format(build="n"))
            out = fakes.run(["bash", fakes.script("server_hot_loop.sh"), old, new, "2"]).stdout
        lines = out.splitlines()
        self.assertEqual(lines[0], "build,run,optimizer,ns_per_value")
        # runs x (configs x builds + the new build's memory floor)
        self.assertEqual(len(lines), 1 + 2 * (5 * 2 + 1))
        self.assertEqual(lines[1], "old,1,o,--optimizer=sgd")
        self.assertEqual(lines[2], "new,1,n,--optimizer=sgd")
        self.assertEqual(lines[11], "floor,1,n,--memory_floor")
        self.assertEqual(lines[-1], "floor,2,n,--memory_floor")


if __name__ == "__main__":
    unittest.main()
