"""The simulator's inputs about threads on a shaped link, measured with no computation
(docs/results/simulator/simulator.md): what simulator_calibration.py writes into every
calibration set alike (p3/sim Calibration):
  * shaped_bytes_per_wake: the bytes a thread handles per wake-up (off by default: a
    what-if that lost hits, "Preemptions per bytes on a shaped link");
  * shaped_stream_s_per_byte, shaped_stream_wakes_per_byte: the CPU and the wake-ups a
    byte costs more for each side when other streams share its link in its direction, at
    every credit (measured at credit 0); shaped_stream_turns_s_per_byte and
    shaped_stream_turns_wakes_per_byte: 0, unless `calibrate --stream_turns` (a what-if:
    the writers of one process taking turns at credit 0, which a 1 MiB credit removes in
    the benchmark; in training the credit gained nothing, "The credit where a process has
    several remote peers") ("Streams that share a link").
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator_points as sp  # noqa: E402
import streaming_streams  # noqa: E402
from results_lib import csv_io  # noqa: E402

# The wake-ups of a communication thread on a shaped link: streaming_wakeups.py's sleeps
# of both processes' threads on a 5 Gbit/s link at slices of 40,000 and 640,000 (3 runs
# each, 2026-12-05, the data path of 537d43f): shaped_bytes_per_wake.
WAKEUPS_SHAPED = "streaming/wakeups_shaped_2026-12-05.csv"
WAKEUPS_LABELS = ("5g_s40000", "5g_s640000")
# bench_streaming with 1, 2 and 3 servers on one emulated 1 and 2 Gbit/s link, 5
# interleaved rounds at credit 0 (streaming_streams.py, 2026-12-06 21:05, binaries c4f9bc5:
# the benchmark's worker with one malloc arena, as p3_worker). The sitting of 20:32
# (02d40ed, the worker with per-thread arenas: streams_per_link_2026-12-06.csv) gave 0.403
# ns and 1.006e-5 a byte against this one's 0.428 and 0.990e-5.
STREAMS_PER_LINK = "streaming/streams_per_link_2026-12-06b.csv"
# bench_streaming with 1, 2 and 3 servers on one emulated 1 Gbit/s link, 5 interleaved
# rounds, each round at credit 0 and at 1 MiB (streaming_streams.py --credit_bytes,
# 2026-12-06 22:05, binaries 97c4b6e: the benchmark's worker as p3_worker). The worker
# sends all N gradient streams, each server its one value stream: at credit 0 the
# worker's writers take turns, at 1 MiB (six of its 160 kB messages) they write side by
# side (0.356 ns a byte at credit 0 against 0.122 at 1 MiB).
STREAMS_CREDIT_0 = "streaming/streams_credit0_2026-12-06.csv"
STREAMS_CREDIT_1M = "streaming/streams_credit1m_2026-12-06.csv"


def shaped_bytes_per_wake(path=None, labels=WAKEUPS_LABELS):
    """Calibration::shaped_bytes_per_wake: the bytes a thread on a shaped link handles per
    wake-up, from the sleeps per round trip (both processes, every thread; median of the
    runs) at a small and a large slice size. With max(1, B / W) wake-ups a message of B
    bytes and the small message no longer than W, the sleeps grow by B_large / W: W is the
    large message's bytes over that ratio (to the nearest 1,000 bytes)."""
    sleeps = {}
    for r in csv_io.read_rows(path or sp.results(WAKEUPS_SHAPED)):
        if r["metric"] == "sleeps" and r["process"] in ("worker", "server") \
                and r["label"] in labels:
            key = (r["label"], r["run"])
            sleeps[key] = sleeps.get(key, 0.0) + float(r["per_round_trip"])
    small, large = (statistics.median(v for (lab, _), v in sleeps.items() if lab == label)
                    for label in labels)
    large_bytes = 4 * int(labels[1].rsplit("_s", 1)[1])
    return round(large_bytes / (large / small), -3)


def shaped_stream_costs(turns=False, per_link=None, credit_0=None, credit_1m=None):
    """Calibration::shaped_stream_{,turns_}{s,wakes}_per_byte, per side.

    By default the charge is the same at every credit: streaming_streams.fit of
    STREAMS_PER_LINK (or `per_link`; credit 0: the medians over its rounds, rates and
    stream counts of the extra per byte across over the other streams' share, halved per
    side), and no turns term. A 1 MiB credit cut the benchmark's extra CPU and wake-ups
    but gained nothing in training (credit-2026-12-07: 0.996 - 1.018 of credit 0, the
    rounds' medians, at 1 and 2.5 Gbit/s), where the turns term predicted +11 - 14 % at
    2.5 Gbit/s.

    turns (the what-if): the credit sitting's figures, STREAMS_CREDIT_0 and
    STREAMS_CREDIT_1M. At 1 MiB every stream writes side by side: that fit is the
    side-by-side term. At credit 0 only the gradients' direction takes turns (the worker
    sends every stream, each server one), so the fit there is the side-by-side term plus
    half the turns term: turns = 2 x (credit 0 - 1 MiB)."""
    if not turns:
        s, w, _ = streaming_streams.fit(csv_io.read_rows(per_link or sp.results(STREAMS_PER_LINK)))
        return {"shaped_stream_s_per_byte": s, "shaped_stream_wakes_per_byte": w,
                "shaped_stream_turns_s_per_byte": 0.0, "shaped_stream_turns_wakes_per_byte": 0.0}
    s0, w0, _ = streaming_streams.fit(csv_io.read_rows(credit_0 or sp.results(STREAMS_CREDIT_0)))
    s1, w1, _ = streaming_streams.fit(
        csv_io.read_rows(credit_1m or sp.results(STREAMS_CREDIT_1M)))
    return {"shaped_stream_s_per_byte": s1, "shaped_stream_wakes_per_byte": w1,
            "shaped_stream_turns_s_per_byte": max(0.0, 2 * (s0 - s1)),
            "shaped_stream_turns_wakes_per_byte": max(0.0, 2 * (w0 - w1))}
