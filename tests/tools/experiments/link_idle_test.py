"""tools/experiments/link_idle.py (docs/results/throughput): the link counters' parsing,
each direction's use, the attribution of unused link time to what the worker did, and the
schedule bound's arithmetic, on made-up samples and a made-up trace."""
import json
import os
import tempfile
import unittest

import link_idle

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
    m0: 1000      10    0    0    0     0          0         0     2000      20    0    0    0     0       0          0
    m1: 3000      30    0    0    0     0          0         0     4000      40    0    0    0     0       0          0
"""


def x(pid, tid, name, cat, ts_s, dur_s, **args):
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "cat": cat,
            "ts": ts_s * 1e6, "dur": dur_s * 1e6, "args": args}


def track(pid, tid, name):
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def worker_trace(pid):
    """Two iterations of a 2-block model, each 1 s: wait for block a 0.0-0.2, forward a
    0.2-0.3, forward b 0.3-0.4, (loss 0.4-0.5), backward b 0.5-0.8, backward a 0.8-1.0."""
    ev = [track(pid, 1, "compute"), track(pid, 2, "wait for parameters")]
    for it in (3, 4, 5):
        t = it - 3.0
        ev += [x(pid, 2, f"wait v{it}", "wait", t, 0.2),
               x(pid, 1, "forward a", "forward", t + 0.2, 0.1, iteration=it),
               x(pid, 1, "forward b", "forward", t + 0.3, 0.1, iteration=it),
               x(pid, 1, "backward b", "backward", t + 0.5, 0.3, iteration=it),
               x(pid, 1, "backward a", "backward", t + 0.8, 0.2, iteration=it)]
    return ev


def link_samples(idle):
    """Counters sampled every 50 ms over 3 s of a 1 Gbit/s link: direction d carries a
    saturated link's bytes in a sample unless idle(d, the sample's middle within its 1 s
    iteration)."""
    rate = 1e9 / 8 * 0.957
    samples, c = [], [0, 0, 0, 0]
    t = 0.0
    while t < 3.0 + 1e-9:
        samples.append((round(t, 2), list(c)))
        nxt = round(t + 0.05, 2)
        mid = (t + nxt) / 2 % 1.0
        for d in range(4):
            c[d] += 0 if idle(d, mid) else int(rate * 0.05)
        t = nxt
    return samples


def load(events):
    """The events as trace_events() reads them back from a trace file."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": events}, f)
        return link_idle.trace_events(path)


class LinkIdleTest(unittest.TestCase):
    def test_bridge_ports_give_each_machines_upload_and_download(self):
        devs = link_idle.parse_net_dev(NET_DEV)
        self.assertEqual(devs["m0"], (1000, 2000))
        row = link_idle.sample_row(1.5, devs)
        self.assertEqual(row, ["1.500000", 1000, 2000, 3000, 4000])
        self.assertIsNone(link_idle.sample_row(1.5, {"m0": (1, 2)}))

    def test_use_is_bytes_over_what_a_saturated_link_carries_not_capped(self):
        rate = 1e9 / 8 * 0.957  # 1 Gbit/s at TCP's goodput
        samples = [(0.0, [0, 0, 0, 0]), (0.1, [int(rate * 0.1), int(rate * 0.05), 0,
                                                 int(rate * 0.2)])]
        (t0, t1, use), = link_idle.link_use(samples, 1)
        self.assertEqual((t0, t1), (0.0, 0.1))
        self.assertAlmostEqual(use[0], 1.0, places=6)
        self.assertAlmostEqual(use[1], 0.5, places=6)
        self.assertEqual(use[2], 0.0)
        self.assertAlmostEqual(use[3], 2.0, places=6)  # a late sample's bytes, kept

    def test_best_window_is_the_highest_rate_over_that_long(self):
        samples = [(t / 10, [int(t * 1000 if t < 5 else 5000 + (t - 5) * 3000), 0, 0, 0])
                   for t in range(20)]
        self.assertAlmostEqual(link_idle.best_window(samples, 0, 0.5), 3000 * 10 * 8)

    def test_unused_time_goes_to_what_the_machines_own_worker_did(self):
        events = load(worker_trace(100) + worker_trace(101))
        timelines = [link_idle.worker_timeline(events, r) for r in range(2)]
        self.assertIn((0.0, 0.2, "wait a", 3), timelines[0])
        # Every direction busy, except machine 0's upload idle during backward b (0.5-0.8
        # of each iteration) and machine 1's download idle during the loss (0.4-0.5).
        samples = link_samples(lambda d, mid: (d == 0 and 0.5 < mid < 0.8) or
                               (d == 3 and 0.4 < mid < 0.5))
        rows, by_label = link_idle.analyse(link_idle.link_use(samples, 1), timelines, 3)
        self.assertEqual([r["iteration"] for r in rows], [3, 4])
        self.assertAlmostEqual(rows[0]["span_s"], 1.0)
        self.assertAlmostEqual(rows[0]["m0_up_unused_s"], 0.3, places=3)
        self.assertAlmostEqual(rows[0]["m1_down_unused_s"], 0.1, places=3)
        self.assertAlmostEqual(rows[0]["m0_down_unused_s"], 0.0, places=3)
        self.assertAlmostEqual(by_label["backward b"], 0.6, places=3)
        self.assertAlmostEqual(by_label["loss+step"], 0.2, places=3)
        self.assertAlmostEqual(sum(by_label.values()), 0.8, places=3)

    def test_a_machine_without_a_worker_is_counted_but_not_attributed(self):
        # bench_streaming: its worker on machine 0, the server alone on machine 1.
        events = load(worker_trace(100))
        timelines = [link_idle.worker_timeline(events, r) for r in range(2)]
        self.assertEqual(timelines[1], [])
        samples = link_samples(lambda d, mid: 0.5 < mid < 0.8)  # all idle in backward b
        rows, by_label = link_idle.analyse(link_idle.link_use(samples, 1), timelines, 3)
        self.assertAlmostEqual(rows[0]["m1_up_unused_s"], 0.3, places=3)
        # Machine 0's two directions only: 2 iterations x 2 directions x 0.3 s.
        self.assertAlmostEqual(by_label["backward b"], 1.2, places=3)
        self.assertAlmostEqual(sum(by_label.values()), 1.2, places=3)

    def test_every_machines_port_is_recorded_and_read_back_by_its_header(self):
        # Separate placement: 2 workers' machines and 2 servers'; a row waits for all ports.
        devs = dict(link_idle.parse_net_dev(NET_DEV), m2=(5, 6), m3=(7, 8))
        self.assertEqual(link_idle.machines_in(devs), 4)
        self.assertEqual(link_idle.machines_in(dict(devs, m5=(0, 0))), 4)  # consecutive only
        self.assertEqual(link_idle.sample_row(1.5, devs, 4),
                         ["1.500000", 1000, 2000, 3000, 4000, 5, 6, 7, 8])
        self.assertIsNone(link_idle.sample_row(1.5, devs, 5))
        names = link_idle.directions(4)
        self.assertEqual(names[-2:], ["m3_up", "m3_down"])
        self.assertEqual([link_idle.machine_of(n) for n in ("m3_up", "m12_down")], [3, 12])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            with open(path, "w") as f:
                f.write("time_s," + ",".join(names) + "\n1.5,1,2,3,4,5,6,7,8\n")
            self.assertEqual(link_idle.sample_directions(path), names)
            self.assertEqual(link_idle.read_samples(path), [(1.5, [1, 2, 3, 4, 5, 6, 7, 8])])

    def test_a_servers_machine_is_counted_but_not_attributed_in_separate_placement(self):
        # Workers on machines 0 and 1, servers on 2 and 3: only machine 3's upload idles,
        # during backward b; its unused time is in its column and nobody's cause.
        events = load(worker_trace(100) + worker_trace(101))
        timelines = [link_idle.worker_timeline(events, r) for r in range(4)]
        rate = 1e9 / 8 * 0.957
        samples, c, t = [], [0] * 8, 0.0
        while t < 3.0 + 1e-9:
            samples.append((round(t, 2), list(c)))
            mid = (t + 0.025) % 1.0
            for d in range(8):
                c[d] += 0 if (d == 6 and 0.5 < mid < 0.8) else int(rate * 0.05)
            t = round(t + 0.05, 2)
        rows, by_label = link_idle.analyse(link_idle.link_use(samples, 1), timelines, 3,
                                           link_idle.directions(4))
        self.assertAlmostEqual(rows[0]["m3_up_unused_s"], 0.3, places=3)
        self.assertAlmostEqual(rows[0]["m0_up_unused_s"], 0.0, places=3)
        self.assertAlmostEqual(sum(by_label.values()), 0.0, places=3)

    def test_slices_of_the_plan_map_to_their_tensor_and_block(self):
        blocks = [{"name": "a", "params": [5, 2]}, {"name": "b", "params": [9]}]
        self.assertEqual(link_idle.slice_tensors(blocks, 4),
                         [("a", 0, 5), ("a", 0, 5), ("a", 1, 2), ("b", 2, 9), ("b", 2, 9),
                          ("b", 2, 9)])

    def traced(self):
        """worker_trace(100) with gradient writes: block b's two tensors (slices 1 and 2)
        at +0.55 (a bias: soon after the backward starts) and +0.8 (its weight), block a's
        (slice 0) at +1.0."""
        blocks = [{"name": "a", "params": [10]}, {"name": "b", "params": [1, 10 ** 6]}]
        ev = worker_trace(100) + [track(100, 3, "send to server 0")]
        for it in (3, 4, 5):
            t = it - 3.0
            for sl, at in ((2, 0.8), (1, 0.55), (0, 1.0), (2, 0.81)):
                ev.append(x(100, 3, f"gradient {sl}", "send", t + at, 0.001, slice=sl,
                            iteration=it))
        return load(ev), link_idle.slice_tensors(blocks, 1000)

    def test_a_backward_is_cut_at_each_tensors_gradient_with_the_plan(self):
        events, slices = self.traced()
        timeline = link_idle.worker_timeline(events, 0, slices)
        backward = [(round(s, 3), round(e, 3), label) for s, e, label, it in timeline
                    if it == 3 and label.startswith("backward")]
        self.assertEqual(backward, [(0.5, 0.55, "backward b"), (0.55, 0.8, "backward b"),
                                    (0.8, 1.0, "backward a")])
        order, times = link_idle.block_times_from_trace(events, 0, 3)
        self.assertEqual(order, ["a", "b"])
        self.assertAlmostEqual(times["b"][1], 0.3)

    def test_dead_span_runs_to_the_big_gradient_less_what_came_before(self):
        events, slices = self.traced()
        # 1 value/s of link: the bias (1 parameter) released at +0.55 takes 4 s of link,
        # so the weight's gradient at +0.8 leaves no dead time after it; the span from
        # forward b (+0.3) to the first gradient (+0.55) is dead: 0.25 s.
        self.assertEqual([round(s, 3) for s in link_idle.dead_spans(events, 0, slices, 3, 1.0)],
                         [0.25, 0.25, 0.25])
        # A link so fast that nothing takes time: dead until the last gradient (+1.0).
        self.assertEqual([round(s, 3) for s in link_idle.dead_spans(events, 0, slices, 3, 1e12)],
                         [0.7, 0.7, 0.7])
        # 4e6 values/s: the weight's 4e6 bytes take 1 s, covering block a's gradient.
        self.assertEqual([round(s, 3) for s in link_idle.dead_spans(events, 0, slices, 3, 4e6)],
                         [0.5, 0.5, 0.5])

    def test_schedule_bound_adds_the_dead_span_to_the_links_time(self):
        link_s, t, ratio = link_idle.schedule_bound(58114816, 1, 0.4)
        self.assertAlmostEqual(link_s, 58114816 * 32 / (1e9 * 0.957))
        self.assertAlmostEqual(t, link_s + 0.4)
        self.assertAlmostEqual(ratio, link_s / (link_s + 0.4))
        self.assertLess(ratio, 0.84)

    def test_a_trace_of_a_run_with_packs_is_refused_for_the_per_tensor_cut(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "trace.json")
            link_idle.require_no_packs(trace)  # no config beside it: a run before packs
            for packs, refused in (("0", False), ("65536", True)):
                with open(os.path.join(d, "config.textproto"), "w") as f:
                    f.write("scheduling {\n  slice_params: 40000\n"
                            f"  pack_params: {packs}\n}}\n")
                if refused:
                    with self.assertRaises(SystemExit) as e:
                        link_idle.require_no_packs(trace)
                    self.assertIn("pack_params=0", str(e.exception))
                else:
                    link_idle.require_no_packs(trace)

    def test_levers_pair_each_config_with_its_rounds_default(self):
        rows = [{"status": "ok", "samples_per_second": str(v), "load1": "1.5"}
                for v in (10, 11, 12, 12, 14, 15)]
        rows[5]["status"] = "failed:1"
        labels = ["d", "x", "y", "d", "y", "x"]
        rounds = link_idle.lever_rounds(rows, labels, 3)
        self.assertEqual(rounds, [{"d": (10.0, 1.5), "x": (11.0, 1.5), "y": (12.0, 1.5)},
                                  {"d": (12.0, 1.5), "y": (14.0, 1.5)}])
        table = {r["config"]: r for r in link_idle.lever_table(rounds, "d")}
        self.assertEqual(table["x"]["runs"], 1)
        self.assertEqual(table["y"]["median_sps"], 13.0)
        self.assertAlmostEqual(table["y"]["ratio_to_default_median"], (1.2 + 14 / 12) / 2, 3)
        self.assertEqual(table["d"]["ratio_to_default_median"], 1.0)


if __name__ == "__main__":
    unittest.main()
