"""The simulator's calibrations (configs/sim/calibration_*.json, docs/simulator.md,
"Calibration"), fitted on measurements that are not validation points; and each session's
compute_scale. Used by tools/experiments/simulator.py (`calibrate`, and every prediction).

  * CPU seconds per byte sent and received, and the extra on a shaped link, from the
    streaming micro-benchmark's CPU s/GB (docs/results/streaming/*.csv; no fit);
  * per-message CPU and the writer's wake-up gap: the grid point whose simulated
    streaming goodput is closest (log error) to the measured one at 1, 2.5, 5 Gbit/s and
    loopback, of the runs at slices of 40,000 parameters (STREAMING_SLICE_PARAMS). One
    slice size cannot tell a cost per message from a cost per byte (issue 36: the
    slices-2026-12-05 set had larger slices predicted too fast), so where a set's
    streaming CSV also has loopback runs at a second slice size (bench_streaming.py
    --slice_params=640000 into the same CSV; the size farthest from 40,000 if several),
    the two are fitted jointly instead: the CPU per GB crossing on loopback is
    2 (b + m / B) + u at message bytes B (b: send and receive per byte, each side;
    m: per_message_s, each side; u: the run's own update), so the two sizes' measured
    medians give m from their difference and b from the 40,000 one, and the simulated
    streaming run then uses the measured CPU per GB at both sizes
    (per_message_from_two_sizes; m kept within [0, what leaves b at 0]). Only the
    writer's gap is then left to the grid, on the goodput at both sizes' rates. A set
    whose SETS entry names a "second_size" CSV takes that CSV's second size instead (a
    sitting of the same data path on the same VM). A set with one size takes the
    per-message cost of ONE_SIZE_PER_MESSAGE_SET's joint fit (its own cannot be told from
    its per-byte cost) and fits only the writer's gap on the grid;
  * gloo's ring costs (the DDP peer; nothing like the streaming benchmark exists for
    it): the defaults of p3/sim/simulator.h times one factor, fitted so that ResNet-50's
    DDP point at unlimited bandwidth of the interleaved session (the most CPU-bound DDP
    point) is met; the same factor in every calibration (the peer did not change);
  * compute_scale per model and session: the `local` point of the same session, fitted
    (the VM's speed moves by up to 30 % between sessions): not a validation point;
  * shared_host_compute_speed: half of two single-thread ResNet-50 runs side by side over
    one alone (pipeline/pipeline_contention.csv). No point of the validation enters it;
  * preempt_s: the computation's CPU lost per preemption by a thread waking on its core
    1,000 times a second (simulator/preemption_cost.csv, simulator_preemption_cost.py;
    no validation point). A set whose sitting ran that script (SETS' "preemption")
    takes its own, and its own comm_interference: both differ between VMs;
  * shaped_bytes_per_wake: 0 (off), unless `calibrate --wake_per_bytes` (a what-if);
  * shaped_stream_{s,wakes}_per_byte: a byte's extra on a shaped link shared with other
    streams (STREAMS_PER_LINK, simulator_link_inputs.py); shaped_stream_turns_*: 0,
    unless `calibrate --stream_turns` (a what-if);
  * comm_interference: the computation's CPU lost per core-second of communication on
    its host (preemption_cost.csv's copier on the other core), less what
    shared_host_compute_speed already charges. No point of the validation enters it;
  * update_s_per_byte: the server's aggregation and optimizer per byte of parameters and
    worker, from the server hot-loop benchmark (server_hot_loop/*.csv) of the binaries the
    validated sets ran. The streaming benchmark's server runs the optimizer too (plain SGD,
    one worker): the per-byte costs of sending and receiving are its CPU per GB less
    that update as `perf` measured it (STREAMING_BREAKDOWN; issue 36: it was counted twice);
  * shm_s_per_byte: the shared-memory path's copy per byte (sitting_shm, shm_s_per_byte);
  * ring_link_share (and _beside_compute): the share of a shaped link's rate that gloo's
    ring reaches, per rate (ring_streaming.py; RING_STREAMING), the same in every set;
  * kernel_buffer_bytes: the payload a full send buffer of p3's connections held in
    cluster runs (socket_buffers.py). Each field in detail: docs/simulator.md, "Calibration".
"""
import json
import math
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator_points as sp  # noqa: E402
from results_lib import csv_io, p3_sim, paths  # noqa: E402
from simulator_link_inputs import (STREAMS_CREDIT_0, STREAMS_CREDIT_1M, STREAMS_PER_LINK,  # noqa
                                   WAKEUPS_SHAPED, shaped_bytes_per_wake, shaped_stream_costs)

RING_DEFAULT = {"ring_send_s_per_byte": 0.4e-9, "ring_recv_s_per_byte": 0.4e-9,
                "ring_reduce_s_per_byte": 0.3e-9}
# The disturber of simulator_preemption_cost.py whose wake-up rate is the cluster's: a
# worker's main thread was preempted 550 - 1,150 times a second in fresh-5's runs.
PREEMPT_CONDITION = "same:1000:0"
# The disturber that copies on the other core (memory traffic, no preemption): what
# communication beside a computation costs it.
INTERFERENCE_CONDITION = "other:8388608"
PER_MESSAGE_S = (5e-6, 10e-6, 20e-6, 40e-6)  # the grid of the streaming fit
# The per-message cost of a set whose streaming runs have one slice size: that of the
# oldest data path measured at two (b64bf48, 11.3 µs), since one size cannot tell it from
# the per-byte cost (the grid fit put such sets at 5, 10 or 40 µs, mostly its ends).
ONE_SIZE_PER_MESSAGE_SET = "auto-2026-12-05"
WRITE_GAP_S = (0.0, 30e-6, 60e-6, 120e-6, 200e-6)
RATES = (1.0, 2.5, 5.0, 0.0)
# The server hot-loop run whose build the validated sets ran: `old` (a gradient copied
# into a slot of its own, summed when the last arrives; before d530bf0, 2026-12-04),
# SGD with momentum and weight decay as configs/bench/*, slices of 40,000 out of cache.
HOT_LOOP = "server_hot_loop/server_hot_loop_2026-12-04.csv"
HOT_LOOP_BUILD = "old"
UPDATE_WORKERS = 2  # the update cost's workers: the validated clusters' (2; some 3)
# The streaming benchmark's own update: `perf` of whole streaming runs on loopback
# (streaming.md, "Where each CPU second goes"), the server's optimizer group, CPU s per GB
# crossing, with the server of the validated sets' build (`before`, c4091e2).
STREAMING_BREAKDOWN = "streaming/cpu_breakdown_2026-12-04.csv"
STREAMING_BREAKDOWN_LABEL = "before"
STREAMING_OPTIMIZER_GROUP = "server: the optimizer"
# One worker: its server updates each parameter byte once while two bytes cross.
STREAMING_PARAM_BYTES_PER_CROSSING_BYTE = 0.5
# The streaming benchmark's messages: slices of 40,000 float32 values, one part each, each
# charged per_message_s by its writer and by its reader. A streaming CSV's rows of other
# slice sizes (slice_params) are a second size for the joint fit, never pooled with these;
# a row without slice_params is of this size (the benchmark's default).
STREAMING_SLICE_PARAMS = 40000
STREAMING_MESSAGE_BYTES = STREAMING_SLICE_PARAMS * 4
# The shared-memory runs of a set whose streaming CSV has none: the oldest committed
# (d530bf0, 2026-12-04 23:51, a quiet machine, 5 runs; no run of the shared-memory path
# with the older sets' own binaries exists). Today's builds gave 0.45 - 0.53 s per GB.
SHM_STREAMING = "streaming/streaming_2026-12-04.csv"


# gloo's ring alone on the emulated links (ring_streaming.py) and the size whose share
# the model takes: DDP all-reduces its gradients in buckets of 25 MB.
RING_STREAMING = ("simulator/ring_streaming_2026-12-05.csv",
                  "simulator/ring_streaming_2026-12-05b.csv",
                  "simulator/ring_streaming_2026-12-05c.csv",
                  "simulator/ring_streaming_2026-12-05d.csv")
RING_STREAMING_SIZE = "bucket25mb"


def ring_link_share(paths_=None, size=RING_STREAMING_SIZE, beside_compute=False):
    """{"<Gbit/s>": median link share} over the runs of `size` at each shaped rate, all
    the files' runs pooled: those alone, or with beside_compute those beside a
    computation (ring_streaming.py --beside_compute)."""
    want = ("1",) if beside_compute else ("", "0")
    by_rate = {}
    rows = [r for p in (paths_ or [sp.results(f) for f in RING_STREAMING])
            for r in csv_io.read_rows(p)]
    for r in rows:
        if r["size"] == size and float(r["rate_gbps"]) > 0 and r["link_share"] \
                and r.get("beside_compute", "0") in want:
            by_rate.setdefault(float(r["rate_gbps"]), []).append(float(r["link_share"]))
    return {f"{rate:g}": round(statistics.median(v), 4) for rate, v in sorted(by_rate.items())}


# The send buffers of p3's connections across the shaped links, sampled during cluster
# runs (socket_buffers.py): the simulator's kernel_buffer_bytes.
SOCKET_BUFFERS = "simulator/socket_buffers_2026-12-05.csv"


def kernel_buffer_bytes(path=None):
    """The payload a full send buffer holds: the median send buffer (ss's skmem tb) of the
    samples of connections across the shaped link, times the median payload (notsent +
    unacked x mss) per byte the kernel counts as queued (w) in the samples where the
    buffer was at least half full."""
    rows = [r for r in csv_io.read_rows(path or sp.results(SOCKET_BUFFERS)) if r["network"] == "1"]
    tb = statistics.median(int(r["tb"]) for r in rows)
    payload = statistics.median(
        (int(r["notsent"]) + int(r["unacked"]) * int(r["mss"])) / int(r["w"])
        for r in rows if int(r["w"]) >= int(r["tb"]) / 2)
    return int(tb * payload)


def profile(name):
    return os.path.join(p3_sim.PROFILES, name)


def is_shared_memory(row):
    return str(row.get("shared_memory") or "0").strip().lower() in ("1", "true")


def row_slice_params(row):
    """The slice size of a streaming CSV row (STREAMING_SLICE_PARAMS where not recorded)."""
    return int(float(row.get("slice_params") or STREAMING_SLICE_PARAMS))


def streaming_measured(path, slice_params=STREAMING_SLICE_PARAMS):
    """Medians per rate of goodput and CPU s/GB, of the runs over a socket at slices of
    slice_params: a row of the shared-memory path (bench_streaming.py --shared_memory;
    rate 0 like loopback's) is another data path, not a loopback run."""
    by_rate = {}
    for row in csv_io.read_rows(path):
        if is_shared_memory(row) or row_slice_params(row) != slice_params:
            continue
        by_rate.setdefault(float(row["rate_gbps"]), []).append(row)
    out = {}
    for rate, rows in sorted(by_rate.items()):
        out[rate] = {"goodput": statistics.median(float(r["goodput_gbps"]) for r in rows),
                     "cpu_s_per_gb": statistics.median(float(r["cpu_s_per_gb"]) for r in rows),
                     "worker": statistics.median(float(r["worker_cpu_s"]) for r in rows),
                     "server": statistics.median(float(r["server_cpu_s"]) for r in rows),
                     "runs": len(rows), "commit": rows[0]["commit"]}
    return out


def second_slice_size(path):
    """The slice size other than STREAMING_SLICE_PARAMS of a streaming CSV's loopback runs
    over a socket (the farthest from it, by ratio, if several); None where it has none."""
    sizes = {row_slice_params(r) for r in csv_io.read_rows(path)
             if not is_shared_memory(r) and float(r["rate_gbps"]) == 0.0} \
        - {STREAMING_SLICE_PARAMS}
    return max(sizes, key=lambda n: abs(math.log(n / STREAMING_SLICE_PARAMS)), default=None)


def second_size_runs(s, root=None):
    """(slice size, streaming_measured at it) of a calibration set's second size: from its
    own streaming CSV, or from the CSV its SETS entry names as "second_size"; (None, None)
    where that CSV has none."""
    path = os.path.join(root or paths.ROOT, s.get("second_size", s["streaming"]))
    n = second_slice_size(path)
    return (n, streaming_measured(path, n)) if n else (None, None)


def shm_measured(path):
    """The median CPU s per GB crossing (worker and server together) of a streaming CSV's
    shared-memory runs at STREAMING_SLICE_PARAMS; None where it has none."""
    costs = [float(r["cpu_s_per_gb"]) for r in csv_io.read_rows(path)
             if is_shared_memory(r) and row_slice_params(r) == STREAMING_SLICE_PARAMS]
    return statistics.median(costs) if costs else None


def shm_s_per_byte(shm_cpu_s_per_gb, streaming_update, per_message):
    """shm_s_per_byte (charged by the reader, per byte of a message through shared memory)
    that makes the simulated shared-memory streaming run use shm_cpu_s_per_gb: less the
    run's own update (CPU s per GB crossing) and the per_message_s its writer and its
    reader are charged for each STREAMING_MESSAGE_BYTES; at least 0."""
    per_byte = (shm_cpu_s_per_gb - streaming_update) * 1e-9
    return max(0.0, per_byte - 2 * per_message / STREAMING_MESSAGE_BYTES)


def sitting_shm(s):
    """(CPU s per GB crossing, its CSV) of calibration set s's shared-memory runs: its own
    streaming CSV's where it has them, else SHM_STREAMING's."""
    shm = shm_measured(os.path.join(paths.ROOT, s["streaming"]))
    return (shm, s["streaming"]) if shm is not None else \
        (shm_measured(sp.results(SHM_STREAMING)), SHM_STREAMING)


def simulate_streaming(cal_path, rate, slice_params=STREAMING_SLICE_PARAMS):
    """The streaming benchmark's goodput (Gbit/s) as simulated with a calibration, at
    slices of slice_params (the config's 40,000 unless told)."""
    sets = ["mode=p3", "cluster.workers=1", "cluster.servers=1", "network.placement=separate",
            f"network.bandwidth_gbps={rate}", "training.batch_size=1"]
    if slice_params != STREAMING_SLICE_PARAMS:
        sets.append(f"scheduling.slice_params={slice_params}")
    r = p3_sim.run("configs/bench/resnet50.textproto", profile("streaming_25m.json"), cal_path,
                   sets, sp.HOST + ["--iterations=6", "--warmup=2"])
    return 25_000_000 * 4 * 8 / r["iteration_seconds"] / 1e9


def compute_scale(model, local_sps, cal):
    """The compute_scale at which the simulated `local` matches the measured one."""
    prof = profile(sp.profile_name(model))
    cfg = f"configs/bench/{model}.textproto"
    it = []
    for scale in (1.0, 2.0):
        r = p3_sim.run(cfg, prof, cal, ["mode=local"], sp.HOST + [f"--compute_scale={scale}"])
        it.append(r["iteration_seconds"])
    want = sp.BATCH[model] / local_sps
    return (want - it[0]) / (it[1] - it[0]) + 1.0


def with_temporary(cal, fn):
    """fn(path) with `cal` written to a temporary JSON file at path."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cal, f)
    try:
        return fn(f.name)
    finally:
        os.unlink(f.name)


def fit_ring():
    """The factor on the ring costs that meets RING_POINT (bisection)."""
    pts = sp.points()
    want = next(p for p in pts if (p["set"], p["model"], p["system"], p["bandwidth"],
                                   p["workers"]) == sp.RING_POINT)["measured"]
    current = os.path.join(paths.ROOT, sp.SETS["current"]["file"])
    scale = compute_scale("resnet50", sp.local_of(pts, sp.RING_POINT[0], "resnet50"),
                          sp.SETS["current"]["file"])
    lo, hi = 0.5, 4.0
    for _ in range(8):
        k = (lo + hi) / 2
        with open(current) as f:
            trial = json.load(f)
        trial.update({n: v * k for n, v in RING_DEFAULT.items()})
        r = with_temporary(trial, lambda path: p3_sim.run(
            "configs/bench/resnet50.textproto", profile("resnet50_b8_cpu.json"), path,
            ["mode=p3", "network.bandwidth_gbps=0"],
            sp.HOST + ["--allreduce", f"--compute_scale={scale}"]))
        if r["samples_per_second"] > want:
            lo = k
        else:
            hi = k
    k = (lo + hi) / 2
    print(f"ring costs x {k:.3f} (DDP ResNet-50 unlimited, interleaved session: {want})")
    return {n: v * k for n, v in RING_DEFAULT.items()}


def shared_host_compute_speed():
    """Half of (two single-thread runs side by side) / (one alone), ResNet-50, median."""
    pairs = [float(r["pair_sum_over_alone"])
             for r in csv_io.read_rows(sp.results("pipeline/pipeline_contention.csv"))
             if r["model"] == "resnet50"]
    return statistics.median(pairs) / 2


def preempt_s(path=None):
    """CPU seconds a single-thread ResNet-50 computation lost per preemption, beside a
    thread on its core waking 1,000 times a second (simulator/preemption_cost.csv, or a
    sitting's own at path; median of the rounds). Measured without a cluster: no
    validation point enters it. A median below 0 (noise: fresh-2026-12-06b's) is taken as 0."""
    costs = [float(r["us_per_preemption"])
             for r in csv_io.read_rows(path or sp.results("simulator/preemption_cost.csv"))
             if r["condition"] == PREEMPT_CONDITION and r["us_per_preemption"]]
    median = statistics.median(costs)
    if median < 0:
        print(f"preempt_s: the rounds' median {median:.1f} us < 0 ({path}), taken as 0")
    return max(0.0, median) * 1e-6


def sitting_preemption(s, speed, preempt, interference):
    """(preempt_s, comm_interference) of calibration set s: from its own sitting's
    simulator_preemption_cost.py runs (s["preemption"], a CSV under docs/results) where it
    has them — what a preemption and the copies beside a computation cost differs between
    VMs — else the shared values given."""
    path = s.get("preemption") and sp.results(s["preemption"])
    if not path or not os.path.exists(path):
        return preempt, interference
    return preempt_s(path), comm_interference(speed, path)


def update_s_per_byte(path=None):
    """The server's update (aggregation of W gradients, SGD with momentum, the snapshot)
    per byte of parameters and worker, at UPDATE_WORKERS: the medians of the hot-loop
    benchmark's W = 1 and W = 4 runs (ns per value), taken as linear in W."""
    rows = [r for r in csv_io.read_rows(path or sp.results(HOT_LOOP))
            if r["build"] == HOT_LOOP_BUILD and r["optimizer"] == "sgd" and
            r["slice_params"] == "40000"]
    ns = {w: statistics.median(float(r["ns_per_value"]) for r in rows if int(r["workers"]) == w)
          for w in (1, 4)}
    per_worker = (ns[4] - ns[1]) / 3
    at = ns[1] + per_worker * (UPDATE_WORKERS - 1)
    return at / (4 * UPDATE_WORKERS) * 1e-9


def streaming_update_s_per_gb(path=None):
    """The streaming run's own update, CPU s per GB crossing: the median over runs of the
    server's optimizer group in its `perf` breakdown."""
    return statistics.median(
        float(r["cpu_s_per_gb"]) for r in csv_io.read_rows(path or sp.results(STREAMING_BREAKDOWN))
        if r["label"] == STREAMING_BREAKDOWN_LABEL and r["group"] == STREAMING_OPTIMIZER_GROUP)


def streaming_update_s_per_byte(streaming_update):
    """update_s_per_byte (per parameter byte, one worker) that charges the simulated
    streaming run its own update, from that update's CPU s per GB crossing."""
    return streaming_update / STREAMING_PARAM_BYTES_PER_CROSSING_BYTE * 1e-9


def comm_interference(speed, path=None):
    """Core-seconds a computation loses per core-second of copying on another core of its
    host, beyond what sharing busy cores at `speed` (shared_host_compute_speed) already
    costs it in the model: per round of preemption_cost.csv's INTERFERENCE_CONDITION, the
    computation's extra core-seconds per iteration over the copier's; the median, less
    1 / speed - 1; at least 0."""
    rows = [r for r in csv_io.read_rows(path or sp.results("simulator/preemption_cost.csv"))
            if r["condition"] == INTERFERENCE_CONDITION]
    measured = statistics.median(float(r["extra_core_s_per_iteration"]) /
                                 float(r["disturber_core_s_per_iteration"]) for r in rows)
    return max(0.0, measured - (1 / speed - 1))


def streaming_costs(name, s, measured, speed, preempt, update, streaming_update,
                    interference=0.0, bytes_per_wake=0.0):
    """A calibration's CPU costs of communication from its streaming CSV's medians:
    `streaming_update` (CPU s per GB crossing) is the streaming server's own update, which
    the measured CPU holds; `update` (s per byte and worker) is the cluster's, which the
    simulator charges apart."""
    loop = measured[0.0]["cpu_s_per_gb"]  # CPU s per GB crossing, both ends together
    # The streaming server's own update is in `loop`; the simulator charges the update
    # apart (update_s_per_byte x bytes x W at the slice's last gradient), so it is taken
    # off here, or it is counted twice.
    comm = loop - streaming_update
    # Split between the sides as the processes' CPU split (worker sends the gradients,
    # the server the values; each does both, so the split is close to even).
    send = comm / 2 * 1e-9
    # The shaped links' extra over loopback (the update is in both, and cancels).
    extra = {rate: (measured[rate]["cpu_s_per_gb"] - loop) / 2 for rate in (1.0, 2.5, 5.0)}
    exponent = math.log(extra[1.0] / extra[5.0]) / math.log(5.0)
    if exponent < 0:
        # The extra does not fall with the rate (flat within the runs' spread on the
        # cc-2026-12-02 VM); the model takes no negative exponent.
        print(f"{name}: shaped exponent {exponent:.3f} < 0, taken as 0")
        exponent = 0.0
    return {"_source": f"tools/experiments/simulator.py calibrate from {s['streaming']} "
                       f"(commit {measured[0.0]['commit']}, medians of "
                       f"{measured[0.0]['runs']} runs per rate); binaries: {s['binaries']}",
            "send_s_per_byte": send, "recv_s_per_byte": send,
            "shaped_s_per_byte_at_1g": extra[1.0] * 1e-9, "shaped_exponent": exponent,
            "shared_host_compute_speed": speed, "preempt_s": preempt,
            "update_s_per_byte": update, "comm_interference": interference,
            "shaped_bytes_per_wake": bytes_per_wake}


def per_byte_less_messages(cal, per_message):
    """cal with its send and receive costs per byte less the per-message cost they hold:
    the streaming benchmark's CPU per GB holds its messages' cost (one slice size), and
    the simulator charges per_message_s on top of the per-byte costs."""
    per_byte = per_message / STREAMING_MESSAGE_BYTES  # each side's, per byte of the message
    return dict(cal, send_s_per_byte=cal["send_s_per_byte"] - per_byte,
                recv_s_per_byte=cal["recv_s_per_byte"] - per_byte, per_message_s=per_message)


def fit_messages(name, cal, measured, streaming_update, per_messages=PER_MESSAGE_S):
    """(per_message_s, write_gap_s, send_s_per_byte) of the grid (per_messages x
    WRITE_GAP_S) whose simulated streaming goodput is closest to the measured one (rms log
    error over RATES); the streaming run simulated with its own update (streaming_update,
    CPU s per GB crossing) and with the per-byte costs less each per-message cost, so that
    its CPU per GB stays the measured."""
    best = None
    for per_message in per_messages:
        for gap in WRITE_GAP_S:
            trial = dict(per_byte_less_messages(cal, per_message), write_gap_s=gap,
                         update_s_per_byte=streaming_update_s_per_byte(streaming_update))
            err = with_temporary(trial, lambda path: sum(
                math.log(simulate_streaming(path, rate) / measured[rate]["goodput"]) ** 2
                for rate in RATES))
            print(f"{name}: per_message {per_message*1e6:.0f} us, gap {gap*1e6:.0f} us: "
                  f"rms log error {math.sqrt(err/4):.3f}")
            if best is None or err < best[0]:
                best = (err, per_message, gap)
    return best[1], best[2], per_byte_less_messages(cal, best[1])["send_s_per_byte"]


def per_message_from_two_sizes(cpu_small, cpu_large, params_large, streaming_update):
    """(per_message_s, send_s_per_byte): the per-message and per-byte costs of each side
    that reproduce the measured loopback CPU s per GB crossing at slices of
    STREAMING_SLICE_PARAMS (cpu_small) and of params_large (cpu_large), both holding the
    run's own update (streaming_update, s per GB crossing): per byte crossing,
    cpu x 1e-9 = 2 (b + m / bytes) + update at either size. m is kept within [0, the m
    that leaves b at 0]; then only the smaller size's CPU is met."""
    small, large = STREAMING_MESSAGE_BYTES, params_large * 4
    comm = (cpu_small - streaming_update) * 1e-9  # both sides, per byte crossing
    m = (cpu_small - cpu_large) * 1e-9 / (2 * (1 / small - 1 / large))
    m = min(max(m, 0.0), comm / 2 * small)
    return m, comm / 2 - m / small


def one_size_per_message(streaming_update, root=None):
    """per_message_s of ONE_SIZE_PER_MESSAGE_SET's joint fit at its two slice sizes."""
    s = sp.SETS[ONE_SIZE_PER_MESSAGE_SET]
    second, m2 = second_size_runs(s, root)
    m = streaming_measured(os.path.join(root or paths.ROOT, s["streaming"]))
    return per_message_from_two_sizes(m[0.0]["cpu_s_per_gb"], m2[0.0]["cpu_s_per_gb"], second,
                                      streaming_update)[0]


def fit_messages_two_sizes(name, cal, measured, second, measured2, streaming_update):
    """(per_message_s, write_gap_s, send_s_per_byte): per_message_s and the per-byte costs
    from the loopback CPU per GB at both slice sizes (per_message_from_two_sizes), and the
    gap of the grid whose simulated streaming goodput is closest to the measured one
    (rms log error over RATES at STREAMING_SLICE_PARAMS and every rate measured at
    `second` slice parameters, measured2)."""
    per_message, per_byte = per_message_from_two_sizes(
        measured[0.0]["cpu_s_per_gb"], measured2[0.0]["cpu_s_per_gb"], second,
        streaming_update)
    print(f"{name}: per_message {per_message*1e6:.2f} us, send and receive "
          f"{per_byte*1e9:.4f} ns a byte each, from loopback CPU "
          f"{measured[0.0]['cpu_s_per_gb']:.4f} s/GB at {STREAMING_SLICE_PARAMS} and "
          f"{measured2[0.0]['cpu_s_per_gb']:.4f} at {second} parameters a slice")
    base = dict(per_byte_less_messages(cal, per_message),
                update_s_per_byte=streaming_update_s_per_byte(streaming_update))
    points = [(rate, STREAMING_SLICE_PARAMS, measured[rate]["goodput"]) for rate in RATES] + \
        [(rate, second, measured2[rate]["goodput"]) for rate in sorted(measured2)]
    best = None
    for gap in WRITE_GAP_S:
        err = with_temporary(dict(base, write_gap_s=gap), lambda path: sum(
            math.log(simulate_streaming(path, rate, n) / goodput) ** 2
            for rate, n, goodput in points))
        print(f"{name}: gap {gap*1e6:.0f} us: rms log error "
              f"{math.sqrt(err/len(points)):.3f} ({len(points)} rates and sizes)")
        if best is None or err < best[0]:
            best = (err, gap)
    return per_message, best[1], per_byte


def write_calibration(path, cal):
    with open(path, "w") as f:
        json.dump(cal, f, indent=2)
        f.write("\n")


def write_launcher_calibration(root=None):
    """Writes the launcher's calibration (sp.LAUNCHER's file) as a copy of its set's
    committed file, with the set named at the head of `_source`; returns the path."""
    root = root or paths.ROOT
    s = sp.SETS[sp.LAUNCHER["set"]]
    with open(os.path.join(root, s["file"])) as f:
        cal = json.load(f)
    cal["_source"] = (f"the launcher's calibration (tools/launch_cluster.cc): calibration set "
                      f"{sp.LAUNCHER['set']}, a copy of {s['file']} written by "
                      f"tools/experiments/simulator.py calibrate --only={sp.LAUNCHER['set']} "
                      f"(or --only=launcher); that set's: " + cal["_source"])
    path = os.path.join(root, sp.LAUNCHER["file"])
    write_calibration(path, cal)
    return path


def calibrate(only="", wake_per_bytes=False, stream_turns=False):
    """Fits every calibration set of SETS (or those named in `only`, comma-separated) and
    writes its file; the ring factor is fitted with the current set and reused. The
    launcher's calibration (sp.LAUNCHER) is written after its set; `only` "launcher"
    copies the set's committed file alone, fitting nothing. shaped_bytes_per_wake: 0 (off),
    or with wake_per_bytes the measured shaped_bytes_per_wake() (a what-if: it lost hits).
    stream_turns: the streams' charge split into side by side and the writers' turns at
    credit 0 (a what-if: training gained nothing from the credit that removes the turns;
    simulator_link_inputs.shaped_stream_costs)."""
    names = only.split(",") if only else []
    if names and all(n == "launcher" for n in names):
        print(f"wrote {write_launcher_calibration()} from {sp.SETS[sp.LAUNCHER['set']]['file']}")
        return
    ring = {}
    first = True
    speed = shared_host_compute_speed()
    print(f"shared_host_compute_speed {speed:.4f} (pipeline_contention.csv, ResNet-50 pairs)")
    preempt = preempt_s()
    print(f"preempt_s {preempt * 1e6:.1f} us (preemption_cost.csv, {PREEMPT_CONDITION})")
    update = update_s_per_byte()
    print(f"update_s_per_byte {update * 1e9:.3f} ns ({HOT_LOOP}, {HOT_LOOP_BUILD}, "
          f"W = {UPDATE_WORKERS})")
    interference = comm_interference(speed)
    print(f"comm_interference {interference:.4f} (preemption_cost.csv, {INTERFERENCE_CONDITION}, "
          f"less 1 / {speed:.4f} - 1)")
    wake = shaped_bytes_per_wake() if wake_per_bytes else 0.0
    print(f"shaped_bytes_per_wake {wake:.0f} (measured {shaped_bytes_per_wake():.0f}, "
          f"{WAKEUPS_SHAPED}; 0: off, unless --wake_per_bytes)")
    streams = shaped_stream_costs(turns=stream_turns)
    source = (f"{STREAMS_CREDIT_0}, {STREAMS_CREDIT_1M}" if stream_turns
              else f"{STREAMS_PER_LINK}; turns 0 unless --stream_turns")
    print(f"shaped_stream_s_per_byte {streams['shaped_stream_s_per_byte'] * 1e9:.3f} ns, "
          f"shaped_stream_wakes_per_byte {streams['shaped_stream_wakes_per_byte']:.4g}, "
          f"turns {streams['shaped_stream_turns_s_per_byte'] * 1e9:.3f} ns, "
          f"{streams['shaped_stream_turns_wakes_per_byte']:.4g} ({source})")
    streaming_update = streaming_update_s_per_gb()
    print(f"the streaming run's own update: {streaming_update:.4f} s per GB crossing "
          f"({STREAMING_BREAKDOWN}, {STREAMING_BREAKDOWN_LABEL})")
    one_size = one_size_per_message(streaming_update)
    print(f"per_message_s of the sets with one slice size: {one_size * 1e6:.2f} us "
          f"({ONE_SIZE_PER_MESSAGE_SET}'s two sizes)")
    for name, s in sp.SETS.items():
        if only and name not in names:
            if first and name == "current":
                # The ring factor is fitted on the current calibration only; reuse it.
                with open(os.path.join(paths.ROOT, s["file"])) as f:
                    ring.update({k: v for k, v in json.load(f).items()
                                 if k.startswith("ring_") and "link_share" not in k})
                first = False
            continue
        if not os.path.exists(os.path.join(paths.ROOT, s["streaming"])):
            print(f"{name}: no {s['streaming']} yet, not calibrated")
            continue
        m = streaming_measured(os.path.join(paths.ROOT, s["streaming"]))
        own_preempt, own_interference = sitting_preemption(s, speed, preempt, interference)
        if (own_preempt, own_interference) != (preempt, interference):
            print(f"{name}: the sitting's own preempt_s {own_preempt * 1e6:.1f} us, "
                  f"comm_interference {own_interference:.4f} ({s['preemption']})")
        cal = streaming_costs(name, s, m, speed, own_preempt, update, streaming_update,
                              own_interference, wake)
        cal.update(streams)
        second, m2 = second_size_runs(s)
        if second:
            per_message, gap, per_byte = fit_messages_two_sizes(name, cal, m, second, m2,
                                                                streaming_update)
            cal["_source"] += (f"; per_message_s with slices of {second} parameters too "
                               f"(medians of {m2[0.0]['runs']} loopback runs"
                               f"{', ' + s['second_size'] if 'second_size' in s else ''})")
        else:
            per_message, gap, per_byte = fit_messages(name, cal, m, streaming_update,
                                                      (one_size,))
            cal["_source"] += (f"; per_message_s {one_size * 1e6:.2f} us, "
                               f"{ONE_SIZE_PER_MESSAGE_SET}'s (one slice size here)")
        cal.update(per_message_s=per_message, write_gap_s=gap, send_s_per_byte=per_byte,
                   recv_s_per_byte=per_byte)
        shm, shm_source = sitting_shm(s)
        cal["shm_s_per_byte"] = shm_s_per_byte(shm, streaming_update, per_message)
        print(f"{name}: shm_s_per_byte {cal['shm_s_per_byte'] * 1e9:.3f} ns "
              f"({shm_source}'s shared-memory runs, {shm:.3f} s per GB)")
        cal["ring_link_share"] = ring_link_share()
        cal["ring_link_share_beside_compute"] = ring_link_share(beside_compute=True)
        print(f"{name}: ring_link_share {cal['ring_link_share']}, beside a computation "
              f"{cal['ring_link_share_beside_compute']} ({', '.join(RING_STREAMING)}, "
              f"{RING_STREAMING_SIZE})")
        cal["kernel_buffer_bytes"] = kernel_buffer_bytes()
        print(f"{name}: kernel_buffer_bytes {cal['kernel_buffer_bytes']} ({SOCKET_BUFFERS})")
        cal.update(ring)
        path = os.path.join(paths.ROOT, s["file"])
        write_calibration(path, cal)
        if first:
            ring.update(fit_ring())  # needs the current calibration file written first
            cal.update(ring)
            write_calibration(path, cal)
            first = False
        print(f"{name}: wrote {s['file']}:")
        as_streaming = dict(cal, update_s_per_byte=streaming_update_s_per_byte(streaming_update))
        for n, measured in ((STREAMING_SLICE_PARAMS, m), (second, m2)):
            for rate in (RATES if n == STREAMING_SLICE_PARAMS else sorted(measured or {})):
                g = with_temporary(as_streaming, lambda p: simulate_streaming(p, rate, n))
                print(f"  {rate:4} Gbit/s{'' if n == STREAMING_SLICE_PARAMS else f', {n}'}: "
                      f"measured {measured[rate]['goodput']:.2f}, simulated {g:.2f} Gbit/s")
    if not names or sp.LAUNCHER["set"] in names or "launcher" in names:
        print(f"wrote {write_launcher_calibration()} (the launcher's) from "
              f"{sp.SETS[sp.LAUNCHER['set']]['file']}")
