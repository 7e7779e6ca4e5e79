"""tools/experiments/trace_small_sends.py on a made-up trace: small sends counted per
writer track, and folded only when the one before on the same track is small too and
ended within the gap."""
import gzip
import json
import os
import tempfile
import unittest

import trace_small_sends


def send(pid, tid, ts, dur, nbytes):
    return {"ph": "X", "cat": "send", "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "name": "gradient", "args": {"bytes": nbytes}}


EVENTS = [
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "send to server 0"}},
    {"ph": "M", "name": "thread_name", "pid": 9, "tid": 3, "args": {"name": "to worker 0"}},
    # Track 1:2, out of order: small at 0, small right after (foldable), large, small right
    # after the large one (not foldable: the one before is large), small 100 µs later.
    send(1, 2, 20, 5, 100), send(1, 2, 0, 10, 800), send(1, 2, 30, 50, 1000000),
    send(1, 2, 85, 5, 64), send(1, 2, 190, 5, 64),
    # Track 9:3: two small sends back to back, but another track's send in between does
    # not count.
    send(9, 3, 0, 10, 10), send(9, 3, 12, 10, 10),
    {"ph": "X", "cat": "compute", "pid": 1, "tid": 5, "ts": 0, "dur": 1000, "name": "forward",
     "args": {}},
]


class TraceSmallSendsTest(unittest.TestCase):
    def test_small_and_foldable_sends_per_track(self):
        counts = trace_small_sends.count(EVENTS, small_bytes=1000, gap_us=30)
        self.assertEqual(counts["1:send to server 0"], (5, 4, 1))
        self.assertEqual(counts["9:to worker 0"], (2, 2, 1))
        self.assertEqual(counts["all"], (7, 6, 2))

    def test_a_wider_gap_folds_more_and_a_gzipped_trace_reads_the_same(self):
        counts = trace_small_sends.count(EVENTS, small_bytes=1000, gap_us=200)
        self.assertEqual(counts["1:send to server 0"], (5, 4, 2))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json.gz")
            with gzip.open(path, "wt") as f:
                json.dump({"traceEvents": EVENTS}, f)
            self.assertEqual(trace_small_sends.load(path), EVENTS)


if __name__ == "__main__":
    unittest.main()
