"""The pipeline page's scripts (docs/results/pipeline): their reports from a few rows of
the committed CSVs, their pure functions, and pipeline_lstm.py whole against a stand-in
pipeline_train."""
import os
import tempfile
import unittest

import fakes
import pipeline
import pipeline_memory
import pipeline_schedules
from results_lib import csv_io

T = fakes.TESTDATA


class PipelineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_report_tables_accuracy_and_throughput_without_touching_the_page(self):
        for name in ("pipeline_accuracy.csv", "pipeline_throughput.csv"):
            with open(f"{T}/{name}") as f, open(f"{self.out}/{name}", "w") as g:
                g.write(f.read())
        fakes.run_script("pipeline.py", "--part=report", f"--out={self.out}")
        self.assertFalse(os.path.exists(f"{self.out}/pipeline.md"))
        with open(f"{self.out}/pipeline_tables.md") as f:
            text = f.read()
        self.assertIn("| data_parallel | 2 | 2 replicas |", text)
        self.assertIn("| spectrain_v1 | 2 | conv1 \\| conv2+fc1+fc2 |", text)
        self.assertIn("### small_cnn (batch 32, 600 mini-batches per run)", text)
        self.assertIn("| single_device | 1 |", text)
        self.assertTrue(os.path.getsize(f"{self.out}/pipeline_accuracy.png") > 0)

    def test_partition_bound_is_all_blocks_over_the_slowest_stage(self):
        self.assertEqual(pipeline.partition_bound({"block_seconds": [1, 1, 2],
                                                   "boundaries": [2]}), 2.0)
        self.assertEqual(pipeline.partition_bound({}), "")

    def test_schedules_ideal_bubbles_and_report(self):
        self.assertAlmostEqual(pipeline_schedules.ideal("gpipe", "vanilla", 4, 2, 60), 1 / 5)
        self.assertAlmostEqual(pipeline_schedules.ideal("interleaved_1f1b", "vanilla", 2, 2, 60),
                               1 / 5)
        self.assertAlmostEqual(pipeline_schedules.ideal("1f1b", "vanilla", 1, 4, 60), 3 / 4)
        self.assertAlmostEqual(pipeline_schedules.ideal("1f1b", "spectrain", 1, 2, 60), 1 / 61)
        md = f"{self.out}/s.md"
        fakes.run_script("pipeline_schedules.py", "--report_only",
                         f"--csv={T}/pipeline_schedules.csv", f"--markdown={md}")
        with open(md) as f:
            self.assertIn("| 1f1b | vanilla | 2 | 1 |", f.read())

    def test_memory_tables_and_recompute_costs(self):
        md = f"{self.out}/m.md"
        fakes.run_script("pipeline_memory.py", "--report_only", f"--csv={T}/pipeline_memory.csv",
                         f"--markdown={md}", f"--plot={self.out}/m.png")
        with open(md) as f:
            text = f.read()
        self.assertIn("### small_cnn, 2 stages (batch 32; stages: conv1 | conv2+fc1+fc2;", text)
        self.assertRegex(text, r"\| vanilla \| on \| .* \| [+-]\d+ % / [+-]\d+ % \|")

    def test_with_boundaries_writes_them_into_the_pipeline_section(self):
        src = f"{self.out}/c.textproto"
        with open(src, "w") as f:
            f.write('name: "x"\npipeline {\n  stages: 2\n}\n')
        pipeline_memory.with_boundaries(src, [3, 7], f"{self.out}/d.textproto")
        with open(f"{self.out}/d.textproto") as f:
            self.assertEqual(f.read(), 'name: "x"\npipeline {\n  boundaries: 3\n  boundaries: 7\n'
                                       "  stages: 2\n}\n")

    def test_lstm_grid_runs_and_tables_the_seeds(self):
        binary = fakes.pipeline_train(self.out)
        csv = f"{self.out}/lstm.csv"
        stdout = fakes.run_script("pipeline_lstm.py", f"--binary={binary}", "--epochs=2",
                                  "--seeds", "1", "2", "--stages", "2", "--modes", "vanilla",
                                  f"--raw={self.out}/raw", f"--csv={csv}",
                                  f"--markdown={self.out}/lstm.md", cwd=fakes.ROOT)
        rows = csv_io.read_rows(csv)
        self.assertEqual([(r["seed"], r["epoch"]) for r in rows],
                         [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")])
        self.assertIn("| vanilla | 2 | lstm.0+lstm.1 \\| lstm.2+lstm.3+fc | 60.15 ± 0.07 | "
                      "70.15 ± 0.07 | 70.10 / 70.20 |", stdout)
        again = fakes.run_script("pipeline_lstm.py", "--report_only", f"--csv={csv}",
                                 f"--markdown={self.out}/again.md")
        self.assertIn("70.10 / 70.20", again)


if __name__ == "__main__":
    unittest.main()
