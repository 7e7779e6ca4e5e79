"""soak_creep.py's pure parts: merging the preloaded sampler's heap figures into the
RSS samples, and the table's growth per hour. The runs themselves need root and minutes:
docs/results/reliability/soak.md, "Creep without faults"."""
import os
import tempfile
import unittest

import soak_creep as sc


def row(t, pid, rss, **kw):
    r = {"t_s": t, "unix_s": 1000 + t, "run": "before", "process": "worker_0", "pid": pid,
         "rss_kb": rss, "anon_kb": rss - 100, "file_kb": 100, "threads": 14}
    r.update(kw)
    return r


class MergeTest(unittest.TestCase):
    def test_each_sample_takes_the_sampler_line_nearest_in_time_of_its_own_pid(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "mallinfo_7.csv"), "w") as f:
                f.write("unix_s,arena,ordblks,hblkhd,uordblks,fordblks,keepcost,threads,rss_kb\n"
                        "1000,10240,1,0,4096,6144,0,14,500\n"
                        "1030,20480,1,1024,8192,12288,0,14,600\n")
            rows = [row(2, 7, 500), row(29, 7, 600), row(29, 8, 700)]
            sc.merge_mallinfo(rows, [("before", d)])
        self.assertEqual((rows[0]["heap_kb"], rows[0]["in_use_kb"], rows[0]["free_kb"]), (10, 4, 6))
        self.assertEqual((rows[1]["heap_kb"], rows[1]["in_use_kb"], rows[1]["free_kb"]), (21, 9, 12))
        self.assertNotIn("heap_kb", rows[2])  # another pid: no sampler lines


class ReportTest(unittest.TestCase):
    def test_growth_per_hour_runs_from_the_first_sample_after_warm_up_to_the_last(self):
        rows = [row(0, 7, 100, heap_kb=1, in_use_kb=1, free_kb=0),
                row(120, 7, 1000, heap_kb=2, in_use_kb=2, free_kb=0),
                row(1920, 7, 1500, heap_kb=2, in_use_kb=2, free_kb=0)]
        rows = [{k: str(v) for k, v in r.items()} for r in rows]
        table = sc.report(rows, from_s=120).splitlines()
        self.assertEqual(len(table), 3)
        cells = [c.strip() for c in table[2].split("|")[1:-1]]
        self.assertEqual(cells[:4], ["before", "worker_0", "30.0", "1,000 → 1,500"])
        self.assertEqual(cells[-2:], ["+1,000", "+0"])  # 500 kB in half an hour


if __name__ == "__main__":
    unittest.main()
