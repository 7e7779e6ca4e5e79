"""tools/experiments/value_waits.py (docs/results/simulator): each block's wait per
iteration, and the first block's wait cut into its last slice's spans, on a made-up trace
of 2 workers and 1 server (the launcher's and p3_sim's event names and arguments)."""
import gzip
import json
import math
import os
import tempfile
import unittest

import value_waits


def x(pid, tid, name, ts_s, dur_s, **args):
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "cat": "c",
            "ts": ts_s * 1e6, "dur": dur_s * 1e6, "args": args}


def track(pid, tid, name):
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def trace():
    """Block a is slice 0, block b slice 1. In each iteration i (1 s from i - 3.0), worker
    0's backward writes slice 0's gradient at +0.90 and worker 1's at +0.95; the server
    receives them at +0.93 and +0.99, writes the values at +1.00 (both workers) and they
    arrive at +1.02 (worker 0) and +1.03 (worker 1). Each worker's next forward waits for
    block a from +0.96 and for block b from +1.10 (worker 0: 0.05 s; worker 1: 0.02 s)."""
    ev = [track(200, 0, "from worker 0"), track(200, 1, "from worker 1"),
          track(200, 2, "to worker 0"), track(200, 3, "to worker 1")]
    for w in (0, 1):
        pid = 100 + w
        ev += [track(pid, 0, "compute"), track(pid, 1, "wait for parameters"),
               track(pid, 2, "send to server 0"), track(pid, 3, "receive from server 0")]
    for it in (3, 4, 5):
        t = it - 3.0
        for w, sent, got in ((0, 0.90, 1.02), (1, 0.95, 1.03)):
            pid = 100 + w
            ev += [x(pid, 0, "forward a", t + 0.10, 0.05, iteration=it),
                   x(pid, 0, "forward b", t + 0.20, 0.05, iteration=it),
                   x(pid, 0, "backward b", t + 0.50, 0.2, iteration=it),
                   x(pid, 0, "backward a", t + 0.70, 0.2, iteration=it),
                   x(pid, 2, "gradient 0", t + sent, 0.001, slice=0, iteration=it),
                   x(pid, 3, "params 0", t + got, 0.001, slice=0, version=it + 1)]
            v = f"wait v{it + 1}"
            ev.append(x(pid, 1, v, t + 0.96, got - 0.96, first_slice=0, last_slice=1))
            ev.append(x(pid, 1, v, t + 1.10, 0.05 if w == 0 else 0.02, first_slice=1,
                        last_slice=2))
        ev += [x(200, 0, "aggregate 0", t + 0.93, 0.001, slice=0, iteration=it),
               x(200, 1, "aggregate+update 0", t + 0.99, 0.001, slice=0, iteration=it),
               x(200, 2, "params 0", t + 1.00, 0.001, slice=0, version=it + 1),
               x(200, 3, "params 0", t + 1.00, 0.001, slice=0, version=it + 1)]
    return ev


def load(events, gz=False):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json" + (".gz" if gz else ""))
        with (gzip.open(path, "wt") if gz else open(path, "w")) as f:
            json.dump({"traceEvents": events}, f)
        return value_waits.read_events(path)


class ValueWaitsTest(unittest.TestCase):
    def test_the_first_blocks_wait_is_cut_into_the_last_slices_spans(self):
        rows = value_waits.decompose(load(trace()), 3)
        self.assertEqual([(r["iteration"], r["worker"]) for r in rows],
                         [(3, 0), (3, 1), (4, 0), (4, 1), (5, 0), (5, 1)])
        w0, w1 = rows[0], rows[1]
        # Worker 0 led: its gradient waited 0.06 s for worker 1's at the server.
        self.assertAlmostEqual(w0["uplink_s"], 0.03)
        self.assertAlmostEqual(w0["others_s"], 0.06)
        self.assertAlmostEqual(w0["server_s"], 0.01)
        self.assertAlmostEqual(w0["downlink_s"], 0.02)
        self.assertAlmostEqual(w0["round_trip_s"], 0.12)
        self.assertAlmostEqual(w0["wait_s"], 0.06)
        # Worker 1 was the last: nobody to wait for.
        self.assertAlmostEqual(w1["uplink_s"], 0.04)
        self.assertAlmostEqual(w1["others_s"], 0.0)
        self.assertAlmostEqual(sum(w1[f"{s}_s"] for s in value_waits.SPANS), w1["round_trip_s"])

    def test_a_gzipped_trace_reads_as_the_plain_one(self):
        self.assertEqual(load(trace(), gz=True), load(trace()))

    def test_an_untraced_first_wait_gives_no_row(self):
        # Worker 1's block-a wait of version 5 under 20 us: not in the trace.
        ev = [e for e in trace() if not (e.get("pid") == 101 and e["name"] == "wait v5" and
                                         e["args"].get("first_slice") == 0)]
        rows = value_waits.decompose(load(ev), 3)
        self.assertNotIn((4, 1), [(r["iteration"], r["worker"]) for r in rows])
        self.assertEqual(len(rows), 5)

    def test_each_blocks_wait_per_iteration_and_its_name(self):
        events = load(trace())
        per, forward, backward, spread = value_waits.blocks(events, 3)
        # Versions 4 - 6, both workers: block a 0.06 and 0.07 s, block b 0.05 and 0.02 s.
        self.assertAlmostEqual(per[(0, 1)], (0.06 + 0.07) / 2)
        self.assertAlmostEqual(per[(1, 2)], (0.05 + 0.02) / 2)
        self.assertAlmostEqual(forward, 0.10)
        self.assertAlmostEqual(backward, 0.40)
        self.assertAlmostEqual(spread, 0.0)  # every iteration computes alike
        self.assertEqual(value_waits.block_names(events), {(0, 1): "a", (1, 2): "b"})

    def test_a_slices_gradients_apart_its_values_queued_and_their_tail(self):
        got = value_waits.servers(load(trace()), 3, 4)  # iterations 3 and 4
        # Worker 0's gradient reached the server at +0.93, worker 1's at +0.99.
        self.assertEqual(len(got["gradient_gap"]), 2)
        for gap in got["gradient_gap"] + got["last_two_gap"]:
            self.assertAlmostEqual(gap, 0.06)
        # The workers wrote it at +0.90 and +0.95.
        self.assertEqual(len(got["write_gap"]), 2)
        for gap in got["write_gap"]:
            self.assertAlmostEqual(gap, 0.05)
        # Updated at +0.99 (its start), written to both workers at +1.00.
        self.assertEqual(len(got["write_lag"]), 4)
        for lag in got["write_lag"]:
            self.assertAlmostEqual(lag, 0.01)
        # Last gradient written -> last value in: 0.12 (worker 0), 0.08 (worker 1).
        self.assertEqual(sorted(round(t, 6) for t in got["values_tail"]), [0.08, 0.08, 0.12, 0.12])
        self.assertEqual(value_waits.quantiles([3, 1, 2, 4]), [2, 3, 3, 4])
        self.assertEqual(value_waits.quantiles([]), [None] * 4)

    def test_each_blocks_spread_is_weighted_by_its_time(self):
        self.assertAlmostEqual(value_waits.block_spread(load(trace()), 3), 0.0)
        # Block b's backward 0.1, 0.2, 0.4 s (log sd ln 2 x sqrt(2/3)), the others still.
        ev = [e for e in trace() if e.get("name") != "backward b"]
        ev += [x(100, 0, "backward b", it - 2.5, d, iteration=it)
               for it, d in ((3, 0.1), (4, 0.2), (5, 0.4))]
        mean_b = 0.7 / 3
        times = {"forward a": 0.05, "forward b": 0.05, "backward a": 0.2}
        expected = mean_b * math.log(2) * math.sqrt(2 / 3) / (mean_b + sum(times.values()))
        self.assertAlmostEqual(value_waits.block_spread(load(ev), 3), expected)
        self.assertEqual(value_waits.block_spread(load(ev), 5), 0.0)  # one iteration: none

    def test_the_slices_each_worker_writes_during_its_backward_and_how_alike(self):
        # Iteration 3: both backwards end at 1.0. Worker 0 writes slices 3 and 2 before
        # (0.5, 0.6), 1 and 0 after; worker 1 writes 3 and 1 before, 2 and 0 after.
        ev = [track(100 + w, t, n) for w in (0, 1)
              for t, n in ((0, "compute"), (2, "send to server 0"))]
        for w, order in ((0, (3, 2, 1, 0)), (1, (3, 1, 2, 0))):
            ev += [x(100 + w, 0, "backward b", 0.4, 0.3, iteration=3),
                   x(100 + w, 0, "backward a", 0.7, 0.3, iteration=3)]
            ev += [x(100 + w, 2, f"gradient {s}", 0.5 + 0.1 * i + (0.5 if i > 1 else 0),
                     0.001, slice=s, iteration=3) for i, s in enumerate(order)]
        r = value_waits.early_writes(load(ev), 3)
        self.assertEqual(r["share"], [0.5, 0.5])
        self.assertEqual(len(r["overlap"]), 1)
        self.assertAlmostEqual(r["overlap"][0], 1 / 3)  # {3} of {1, 2, 3}
        self.assertEqual(value_waits.early_writes(load(ev), 4), {"share": [], "overlap": []})

    def test_the_final_syncs_wait_over_every_slice_is_left_out(self):
        ev = trace() + [x(100, 1, "wait v6", 3.5, 0.3, first_slice=0, last_slice=2)]
        per, _, _, _ = value_waits.blocks(load(ev), 3)
        self.assertNotIn((0, 2), per)


if __name__ == "__main__":
    unittest.main()
