"""The calibration's per-message cost from two slice sizes (simulator_calibration.py,
issue 36): streaming rows made from known per-message and per-byte costs at two slice
sizes give those costs back; a streaming CSV with one size takes the reference set's
per-message cost and fits only the writer's gap."""
import json
import os
import tempfile
import unittest
from unittest import mock

import fakes
import simulator_calibration as cal
import simulator_link_inputs
import simulator_two_sizes

T = fakes.TESTDATA
UPDATE = 0.05  # the streaming run's own update, s per GB crossing
HEADER = "rate_gbps,run,goodput_gbps,cpu_s_per_gb,worker_cpu_s,server_cpu_s,commit,slice_params"


def cpu_s_per_gb(per_message, per_byte, slice_params, update=UPDATE):
    """The loopback CPU s per GB crossing of a streaming run charged per_message on each
    side of each message of slice_params float32 values, per_byte on each side of each
    byte, and its own update: the model the fit inverts."""
    return (2 * (per_byte + per_message / (slice_params * 4)) * 1e9) + update


def write_rows(path, sizes, per_message=12e-6, per_byte=0.3e-9, noise=(0.98, 1.0, 1.02)):
    """A streaming CSV of three runs per rate at each slice size, CPU from the model above
    times a spread whose median is 1."""
    with open(path, "w") as f:
        f.write(HEADER + "\n")
        for n in sizes:
            for rate in (1.0, 2.5, 5.0, 0.0):
                for run, k in enumerate(noise):
                    cpu = cpu_s_per_gb(per_message, per_byte, n) * k
                    f.write(f"{rate},{run},{rate or 8.0},{cpu},1.0,1.0,c,{n}\n")


class PreemptionCostTest(unittest.TestCase):
    def test_a_sittings_preemption_cost_is_its_rounds_median_and_never_below_zero(self):
        def write(path, costs):
            with open(path, "w") as f:
                f.write("round,condition,us_per_preemption\n")
                for i, c in enumerate(costs):
                    f.write(f"{i},{cal.PREEMPT_CONDITION},{c}\n{i},none,\n")

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.csv")
            write(path, [20.0, 31.5, 40.0])
            self.assertAlmostEqual(cal.preempt_s(path), 31.5e-6)
            # fresh-2026-12-06b's rounds: noise about a cost of tens of us, median < 0.
            write(path, [-17.8, -9.1, 29.1, -20.0, 58.6])
            self.assertEqual(cal.preempt_s(path), 0.0)


class TwoSizeFitTest(unittest.TestCase):
    def test_two_sizes_give_back_the_per_message_and_per_byte_costs(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            for m, b in ((12e-6, 0.3e-9), (3e-6, 0.45e-9), (30e-6, 0.05e-9)):
                write_rows(path, (40000, 640000), m, b)
                self.assertEqual(cal.second_slice_size(path), 640000)
                small = cal.streaming_measured(path)
                large = cal.streaming_measured(path, 640000)
                got_m, got_b = cal.per_message_from_two_sizes(
                    small[0.0]["cpu_s_per_gb"], large[0.0]["cpu_s_per_gb"], 640000, UPDATE)
                self.assertAlmostEqual(got_m * 1e6, m * 1e6)
                self.assertAlmostEqual(got_b * 1e9, b * 1e9)
                # The simulated run's CPU per GB is the measured one at both sizes.
                for n, meas in ((40000, small), (640000, large)):
                    self.assertAlmostEqual(cpu_s_per_gb(got_m, got_b, n),
                                           meas[0.0]["cpu_s_per_gb"])

    def test_per_byte_costs_less_the_fitted_messages_are_the_joint_fits(self):
        # per_byte_less_messages on the single-size costs with the joint per_message_s
        # gives the joint fit's per-byte cost: the two paths agree on the split.
        small = cpu_s_per_gb(12e-6, 0.3e-9, 40000)
        large = cpu_s_per_gb(12e-6, 0.3e-9, 640000)
        m, b = cal.per_message_from_two_sizes(small, large, 640000, UPDATE)
        one = {"send_s_per_byte": (small - UPDATE) / 2 * 1e-9,
               "recv_s_per_byte": (small - UPDATE) / 2 * 1e-9}
        self.assertAlmostEqual(cal.per_byte_less_messages(one, m)["send_s_per_byte"] * 1e9,
                               b * 1e9)

    def test_the_per_message_cost_stays_between_zero_and_all_of_the_cpu(self):
        # Larger slices costing more per GB: no per-message cost, all of it per byte.
        m, b = cal.per_message_from_two_sizes(1.0, 1.2, 640000, UPDATE)
        self.assertEqual(m, 0.0)
        self.assertAlmostEqual(b * 1e9, (1.0 - UPDATE) / 2)
        # A difference beyond the whole CPU: all of it per message, none per byte.
        m, b = cal.per_message_from_two_sizes(1.0, 0.01, 640000, UPDATE)
        self.assertAlmostEqual(m, (1.0 - UPDATE) * 1e-9 / 2 * 160000)
        self.assertAlmostEqual(b, 0.0)

    def test_one_size_has_no_second_and_other_sizes_stay_out_of_its_medians(self):
        self.assertIsNone(cal.second_slice_size(f"{T}/streaming.csv"))
        want = cal.streaming_measured(f"{T}/streaming.csv")
        with open(f"{T}/streaming.csv") as f:
            lines = f.read().splitlines()
        col = lines[0].split(",").index("slice_params")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
                for x in lines[1:]:  # the same runs at 640,000, twice as cheap per GB
                    cols = x.split(",")
                    cols[col] = "640000"
                    cols[lines[0].split(",").index("cpu_s_per_gb")] = "0.1"
                    f.write(",".join(cols) + "\n")
            self.assertEqual(cal.second_slice_size(path), 640000)
            self.assertEqual(cal.streaming_measured(path), want)
            self.assertEqual(cal.streaming_measured(path, 640000)[0.0]["cpu_s_per_gb"], 0.1)
            # A CSV without the column: every run is of the benchmark's default size.
            with open(path, "w") as f:
                f.write("\n".join(",".join(c for i, c in enumerate(x.split(",")) if i != col)
                                  for x in lines) + "\n")
            self.assertIsNone(cal.second_slice_size(path))
            self.assertEqual(cal.streaming_measured(path), want)

    def test_the_farthest_second_size_is_taken_and_shared_memory_runs_are_not_one(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            with open(path, "w") as f:
                f.write("rate_gbps,shared_memory,cpu_s_per_gb,slice_params\n"
                        "0.0,0,0.9,40000\n0.0,0,0.8,160000\n0.0,0,0.7,10000\n"
                        "5.0,0,1.2,640000\n0.0,1,0.5,640000\n")
            # 640,000 has no loopback run over a socket yet; 10,000 and 160,000 are both
            # 4x off 40,000.
            self.assertIn(cal.second_slice_size(path), (10000, 160000))
            with open(path, "a") as f:
                f.write("0.0,0,0.6,640000\n")
            self.assertEqual(cal.second_slice_size(path), 640000)
            # The shared-memory cost is the default size's only.
            self.assertIsNone(cal.shm_measured(path))

    def test_a_set_takes_its_second_size_from_the_csv_its_entry_names(self):
        with tempfile.TemporaryDirectory() as d:
            write_rows(os.path.join(d, "one.csv"), (40000,))
            write_rows(os.path.join(d, "two.csv"), (40000, 640000), per_message=12e-6)
            own = {"streaming": "one.csv"}
            self.assertEqual(cal.second_size_runs(own, root=d), (None, None))
            n, runs = cal.second_size_runs(dict(own, second_size="two.csv"), root=d)
            self.assertEqual(n, 640000)
            self.assertAlmostEqual(runs[0.0]["cpu_s_per_gb"],
                                   cpu_s_per_gb(12e-6, 0.3e-9, 640000))
            # A set whose own CSV has the second size takes it from there.
            n, runs = cal.second_size_runs({"streaming": "two.csv"}, root=d)
            self.assertEqual(n, 640000)

    def test_the_joint_fit_picks_the_gap_from_both_sizes_goodput(self):
        small = {r: {"goodput": 4.0, "cpu_s_per_gb": cpu_s_per_gb(12e-6, 0.3e-9, 40000)}
                 for r in cal.RATES}
        large = {r: {"goodput": 5.0, "cpu_s_per_gb": cpu_s_per_gb(12e-6, 0.3e-9, 640000)}
                 for r in (5.0, 0.0)}
        asked = []

        def simulated(path, rate, n=cal.STREAMING_SLICE_PARAMS):
            with open(path) as f:
                c = json.load(f)
            asked.append((rate, n, c["per_message_s"]))
            # Goodput falls with the gap; the measured one at both sizes is met at 60 us.
            return (4.0 if n == 40000 else 5.0) * (1 + 60e-6) / (1 + c["write_gap_s"])
        base = {"send_s_per_byte": (small[0.0]["cpu_s_per_gb"] - UPDATE) / 2 * 1e-9}
        base["recv_s_per_byte"] = base["send_s_per_byte"]
        with mock.patch.object(cal, "simulate_streaming", simulated):
            m, gap, b = cal.fit_messages_two_sizes("x", base, small, 640000, large, UPDATE)
        self.assertAlmostEqual(m * 1e6, 12.0)
        self.assertAlmostEqual(b * 1e9, 0.3)
        self.assertEqual(gap, 60e-6)
        # Every gap of the grid at the four rates at 40,000 and the two at 640,000, each
        # with the fitted per-message cost.
        self.assertEqual(len(asked), len(cal.WRITE_GAP_S) * 6)
        self.assertEqual({n for _, n, _ in asked}, {40000, 640000})
        self.assertTrue(all(abs(x - m) < 1e-15 for _, _, x in asked))

    def test_one_size_takes_the_reference_sets_per_message_and_fits_only_the_gap(self):
        with tempfile.TemporaryDirectory() as d:
            write_rows(os.path.join(d, "two.csv"), (40000, 640000), per_message=11e-6)
            with mock.patch.dict(cal.sp.SETS, {cal.ONE_SIZE_PER_MESSAGE_SET:
                                               {"streaming": "two.csv"}}):
                one_size = cal.one_size_per_message(UPDATE, root=d)
        self.assertAlmostEqual(one_size * 1e6, 11.0)
        measured = {r: {"goodput": 4.0, "cpu_s_per_gb": cpu_s_per_gb(11e-6, 0.3e-9, 40000)}
                    for r in cal.RATES}
        asked = []

        def simulated(path, rate, n=cal.STREAMING_SLICE_PARAMS):
            with open(path) as f:
                c = json.load(f)
            asked.append(c["per_message_s"])
            return 4.0 * (1 + 120e-6) / (1 + c["write_gap_s"])
        base = {"send_s_per_byte": (measured[0.0]["cpu_s_per_gb"] - UPDATE) / 2 * 1e-9}
        base["recv_s_per_byte"] = base["send_s_per_byte"]
        with mock.patch.object(cal, "simulate_streaming", simulated):
            m, gap, b = cal.fit_messages("x", base, measured, UPDATE, (one_size,))
        # The per-byte cost is what is left of the one size's CPU: the costs it was made of.
        self.assertEqual((m, gap), (one_size, 120e-6))
        self.assertAlmostEqual(b * 1e9, 0.3)
        self.assertEqual(set(asked), {one_size})  # no other per-message cost was tried
        self.assertEqual(len(asked), len(cal.WRITE_GAP_S) * len(cal.RATES))

    def test_the_what_if_applies_another_sittings_difference_to_the_sets_own_cpu(self):
        # simulator_two_sizes.py: the set's own 40,000 CPU, 640,000's from the difference.
        measured = {r: {"goodput": 4.0, "cpu_s_per_gb": cpu_s_per_gb(12e-6, 0.3e-9, 40000)}
                    for r in cal.RATES}
        difference = measured[0.0]["cpu_s_per_gb"] - cpu_s_per_gb(12e-6, 0.3e-9, 640000)

        def simulated(path, rate, n=cal.STREAMING_SLICE_PARAMS):
            with open(path) as f:
                return 4.0 * (1 + 30e-6) / (1 + json.load(f)["write_gap_s"])
        with mock.patch.object(cal, "simulate_streaming", simulated):
            alt = simulator_two_sizes.two_size_calibration(
                {"per_message_s": 40e-6, "write_gap_s": 200e-6, "other": 1}, measured,
                difference, UPDATE, 0.53)
        self.assertAlmostEqual(alt["per_message_s"] * 1e6, 12.0)
        self.assertAlmostEqual(alt["send_s_per_byte"] * 1e9, 0.3)
        self.assertAlmostEqual(alt["recv_s_per_byte"] * 1e9, 0.3)
        self.assertEqual(alt["write_gap_s"], 30e-6)
        self.assertAlmostEqual(alt["shm_s_per_byte"], cal.shm_s_per_byte(0.53, UPDATE, 12e-6))
        self.assertEqual(alt["other"], 1)



class ShapedBytesPerWakeTest(unittest.TestCase):
    def test_bytes_per_wake_is_the_large_message_over_the_growth_of_the_sleeps(self):
        # Per run, the sleeps of every thread of both processes add up; the medians of the
        # runs (not their means) are compared; other processes and metrics are left out.
        # 40,000 -> 640,000 values (160 kB -> 2.56 MB): sleeps 5 -> 50, W = 2.56 MB / 10.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "w.csv")
            with open(path, "w") as f:
                f.write("label,run,process,thread,metric,per_round_trip\n")
                for label, runs in (("5g_s40000", (5, 4, 90)), ("5g_s640000", (50, 49, 51))):
                    for run, sleeps in enumerate(runs):
                        f.write(f"{label},{run},worker,reader,sleeps,{sleeps * 0.75}\n")
                        f.write(f"{label},{run},server,writer,sleeps,{sleeps * 0.25}\n")
                        f.write(f"{label},{run},tc,tc,sleeps,1000\n")
                        f.write(f"{label},{run},worker,reader,syscalls,1000\n")
            self.assertEqual(cal.shaped_bytes_per_wake(path), 256000)

    def test_streaming_costs_write_the_bytes_per_wake_given_and_zero_by_default(self):
        measured = {r: {"cpu_s_per_gb": 1.0 + r / 10, "commit": "c", "runs": 3}
                    for r in cal.RATES}
        s = {"streaming": "s.csv", "binaries": "b"}
        self.assertEqual(cal.streaming_costs("x", s, measured, 1.0, 0.0, 0.0, 0.0)
                         ["shaped_bytes_per_wake"], 0.0)
        self.assertEqual(cal.streaming_costs("x", s, measured, 1.0, 0.0, 0.0, 0.0, 0.0, 249000.0)
                         ["shaped_bytes_per_wake"], 249000.0)


class StreamCostsTest(unittest.TestCase):
    # streaming_streams.fit per file: (s per byte, wake-ups per byte, differences).
    FITS = {"link.csv": (0.43e-9, 1.0e-5, 20), "c0.csv": (0.36e-9, 1.1e-5, 10),
            "c1m.csv": (0.12e-9, 0.3e-5, 10)}

    def costs(self, **kw):
        with mock.patch.object(simulator_link_inputs.csv_io, "read_rows", lambda path: path), \
                mock.patch.object(simulator_link_inputs.streaming_streams, "fit",
                                  lambda path: self.FITS[path]):
            return simulator_link_inputs.shaped_stream_costs(
                per_link="link.csv", credit_0="c0.csv", credit_1m="c1m.csv", **kw)

    def test_one_charge_at_every_credit_by_default_from_the_credit_0_runs(self):
        self.assertEqual(self.costs(), {"shaped_stream_s_per_byte": 0.43e-9,
                                        "shaped_stream_wakes_per_byte": 1.0e-5,
                                        "shaped_stream_turns_s_per_byte": 0.0,
                                        "shaped_stream_turns_wakes_per_byte": 0.0})

    def test_the_turns_what_if_splits_credit_0_into_side_by_side_and_twice_the_rest(self):
        c = self.costs(turns=True)
        self.assertEqual(c["shaped_stream_s_per_byte"], 0.12e-9)
        self.assertAlmostEqual(c["shaped_stream_turns_s_per_byte"], 0.48e-9)
        self.assertAlmostEqual(c["shaped_stream_turns_wakes_per_byte"], 1.6e-5)
        # Half the turns (only the gradients' direction takes them) give credit 0 back.
        self.assertAlmostEqual(c["shaped_stream_s_per_byte"]
                               + c["shaped_stream_turns_s_per_byte"] / 2, 0.36e-9)


if __name__ == "__main__":
    unittest.main()
