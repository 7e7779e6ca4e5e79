"""tools/experiments/simulator_fresh.py's `collect` (issue 36's fresh sets): the commit its
rows record is the one the runs' own servers say they were built from."""
import os
import tempfile
import unittest

import simulator_fresh


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


if __name__ == "__main__":
    unittest.main()
