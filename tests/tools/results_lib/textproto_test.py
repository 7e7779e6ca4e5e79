"""results_lib.textproto: one scalar field of a text-format config."""
import os
import tempfile
import unittest

from results_lib import paths, textproto


class TextprotoTest(unittest.TestCase):
    def test_int_field_at_any_depth_comments_ignored(self):
        with tempfile.NamedTemporaryFile("w", suffix=".textproto", delete=False) as f:
            f.write('name: "x"\n# batch_size: 99\ntraining {\n  batch_size: 8  # per worker\n'
                    "  warmup_iterations: 3\n  iterations: 40\n}\n")
        try:
            self.assertEqual(textproto.int_field(f.name, "batch_size"), 8)
            self.assertEqual(textproto.int_field(f.name, "iterations"), 40)
            self.assertEqual(textproto.int_field(f.name, "warmup_iterations"), 3)
            self.assertEqual(textproto.int_field(f.name, "seq_len", 16), 16)
            with self.assertRaisesRegex(KeyError, "no seq_len"):
                textproto.int_field(f.name, "seq_len")
        finally:
            os.unlink(f.name)

    def test_bench_config_falls_back_to_the_generic_one(self):
        self.assertTrue(textproto.bench_config("resnet50").endswith(
            "configs/bench/resnet50.textproto"))
        self.assertTrue(textproto.bench_config("no_such_model").endswith(
            "configs/bench_throughput.textproto"))

    def test_the_committed_bench_configs_read(self):
        cfg = os.path.join(paths.ROOT, "configs", "bench", "resnet50.textproto")
        if not os.path.exists(cfg):
            self.skipTest("configs are not in this test's runfiles")
        self.assertGreater(textproto.int_field(cfg, "batch_size"), 0)


if __name__ == "__main__":
    unittest.main()
