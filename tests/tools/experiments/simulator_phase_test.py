"""The phase what-if's helpers (simulator_phase.py, issue 36): the per-iteration table read
from a simulated trace (worker 0's lag behind the earliest worker, its iteration,
computation and wait), which points are re-predicted, and the protocol's columns computed
again for re-predicted points."""
import unittest

import simulator_phase as ph


def meta(pid, name, tid=None, thread=None):
    if thread is None:
        return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}}


def trace(starts, compute_ms=50, waits=None):
    """Two workers (pids 100, 101; compute on tid 0, waits on tid 1) whose iteration i
    starts at starts[w][i] ms, each iteration two compute events of compute_ms / 2; waits:
    {(worker, version): ms}."""
    ev = [meta(100, "worker 0"), meta(101, "worker 1"), meta(200, "server 0"),
          meta(100, None, 0, "compute"), meta(101, None, 0, "compute"),
          meta(100, None, 1, "wait for parameters"), meta(101, None, 1, "wait for parameters"),
          meta(200, None, 0, "compute")]  # a server track named alike is not a worker's
    for w, row in enumerate(starts):
        for i, t in enumerate(row):
            for half in range(2):
                ev.append({"ph": "X", "pid": 100 + w, "tid": 0, "cat": "forward",
                           "ts": (t + half * compute_ms / 2) * 1e3, "dur": compute_ms / 2 * 1e3,
                           "name": "f", "args": {"iteration": i}})
    for (w, v), ms in (waits or {}).items():
        ev.append({"ph": "X", "pid": 100 + w, "tid": 1, "cat": "wait", "ts": 0,
                   "dur": ms * 1e3, "name": f"wait v{v}"})
    ev.append({"ph": "X", "pid": 200, "tid": 0, "cat": "update", "ts": 0, "dur": 9e9,
               "name": "u", "args": {"iteration": 0}})
    return {"traceEvents": ev}


class IterationTableTest(unittest.TestCase):
    def test_lag_is_worker_0s_start_after_the_earliest_worker(self):
        rows = ph.iteration_table(trace([[0, 100, 230, 360], [0, 90, 200, 320]]))
        self.assertEqual([r["lag_ms"] for r in rows], [0, 10, 30])
        self.assertEqual([r["iteration_ms"] for r in rows], [100, 130, 130])

    def test_computation_and_wait_are_worker_0s_own(self):
        rows = ph.iteration_table(trace([[0, 100, 200], [0, 100, 200]], compute_ms=60,
                                        waits={(0, 1): 40, (1, 1): 7, (0, 2): 5}))
        self.assertEqual([r["compute_ms"] for r in rows], [60, 60])
        self.assertEqual([r["wait_ms"] for r in rows], [0, 40])


def row(set_name="s", system="baseline", bw=2.0, predicted=10.0, measured=10.0, fitted=False,
        runs=3):
    return {"set": set_name, "model": "resnet50", "system": system, "bandwidth": bw,
            "workers": 2, "slice_params": 40000, "placement": "colocated", "wire_dtype": "",
            "predicted": predicted, "measured": measured, "ratio": predicted / measured,
            "fitted": fitted, "runs": runs}


class SelectionTest(unittest.TestCase):
    def test_moved_points_and_whole_tensor_points_on_shaped_links_are_re_predicted(self):
        before = [row(system="p3", predicted=10.0), row(system="p3", bw=0.0),
                  row(system="baseline", bw=0.0), row(system="priority_only", bw=1.0),
                  row(system="local", bw=0.0, fitted=True, predicted=3.0)]
        after = [dict(before[0], predicted=9.0)] + before[1:4] + [dict(before[4], predicted=2.0)]
        keys = ph.selected(before, after)
        self.assertEqual(keys, [ph.key(before[0]), ph.key(before[3])])


class RescoredTest(unittest.TestCase):
    def test_a_re_predicted_point_gets_its_ratio_and_hit_again(self):
        rows = [row(predicted=13.0, measured=10.0), row(system="p3", predicted=13.0)]
        out = ph.rescored(rows, {ph.key(rows[0]): 10.5}, {})
        self.assertEqual(out[0]["ratio"], 1.05)
        self.assertTrue(out[0]["protocol_hit"])
        self.assertFalse(out[1]["protocol_hit"])  # not re-predicted: 1.3 stays a miss
        self.assertEqual(rows[0]["predicted"], 13.0)  # the input is not changed

    def test_variants_are_the_scales_and_a_late_window_left_out_whole(self):
        names = [(n, q["iterations"], q["warmup"], x) for n, q, x in
                 ph.variants({"iterations": 43, "warmup": 3})]
        self.assertEqual(len(names), len(ph.SCALES) + 1)
        self.assertEqual(names[-1], ("late", 43 + ph.LATE, 3 + ph.LATE, 1.0))
        self.assertIn(("x1.000", 43, 3, 1.0), names)


if __name__ == "__main__":
    unittest.main()
