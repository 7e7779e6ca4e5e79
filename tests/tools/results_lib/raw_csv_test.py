"""results_lib.raw_csv: the throughput benchmark's raw.csv rows and their filters."""
import os
import tempfile
import unittest

from results_lib import raw_csv


def row(**kw):
    base = {"model": "resnet50", "mode": "p3", "bandwidth_gbps": "1.0", "workers": "2",
            "slice_params": "40000", "samples_per_second": "16.0", "status": "ok",
            "output_dir": "out/bench/runs/resnet50_p3_bw1.0", "wire_dtype": "float32"}
    base.update(kw)
    return base


class RawCsvTest(unittest.TestCase):
    def test_finished_keeps_only_runs_that_ended_ok(self):
        rows = [row(), row(status="failed:1"), row(status="failed:timeout")]
        self.assertEqual(raw_csv.finished(rows), [rows[0]])

    def test_traced_runs_are_told_by_their_folder(self):
        self.assertTrue(raw_csv.is_traced(row(output_dir="out/runs/x_trace_120000")))
        self.assertFalse(raw_csv.is_traced(row()))

    def test_wire_dtype_local_has_none_and_old_rows_ran_float32(self):
        self.assertIsNone(raw_csv.wire_dtype(row(mode="local", wire_dtype="float32")))
        self.assertEqual(raw_csv.wire_dtype(row(wire_dtype="")), "float32")
        del_col = row()
        del del_col["wire_dtype"]
        self.assertEqual(raw_csv.wire_dtype(del_col), "float32")
        self.assertEqual(raw_csv.wire_dtype(row(wire_dtype="bfloat16")), "bfloat16")

    def test_slice_params_default_for_ddp_rows(self):
        self.assertEqual(raw_csv.slice_params(row(mode="ddp", slice_params="")), 40000)
        self.assertEqual(raw_csv.slice_params(row(slice_params="160000")), 160000)
        self.assertEqual(raw_csv.bandwidth(row(bandwidth_gbps="")), 0.0)

    def test_group_collects_samples_per_key_in_row_order(self):
        rows = [row(samples_per_second="2"), row(mode="baseline", samples_per_second="1"),
                row(samples_per_second="3")]
        self.assertEqual(raw_csv.group(rows, lambda r: r["mode"]),
                         {"p3": [2.0, 3.0], "baseline": [1.0]})

    def test_append_creates_the_file_then_keeps_an_older_header(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "new", "raw.csv")
            raw_csv.append(path, row())
            rows = raw_csv.read(path)
            self.assertEqual(list(rows[0]), raw_csv.FIELDS)
            self.assertEqual(rows[0]["samples_per_second"], "16.0")
            old = os.path.join(d, "old.csv")
            with open(old, "w") as f:
                f.write("model,mode,samples_per_second,status\nvgg19,p3,1.4,ok\n")
            raw_csv.append(old, row())
            self.assertEqual(raw_csv.read(old)[1],
                             {"model": "resnet50", "mode": "p3", "samples_per_second": "16.0",
                              "status": "ok"})
            self.assertEqual(len(raw_csv.read_finished(old)), 2)


if __name__ == "__main__":
    unittest.main()
